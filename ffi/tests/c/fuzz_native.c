/* A seeded fuzz of the native C ABI: `fuzz_native SEED ITERATIONS`.
 *
 * Every iteration makes one random call. Invalid calls (bad PE, non-symmetric and NULL addresses, ranges past the
 * heap, bad and overflowing strides, huge sizes, bad team handles, bad roots, allocation and collective lengths
 * that differ between PEs)
 * must return the error code of their class, never crash and never succeed. Valid calls (put, p, get, g, iput,
 * iget, fetch-add, zero-length calls) are checked against a shadow copy: each PE owns one segment of the array on
 * every PE and is the only writer there. Every PE draws collectives (barrier, broadcast, sum reduction, alltoall,
 * and their invalid forms) from a stream shared by all PEs, so that they are called in the same order everywhere.
 * At the end every PE checks its segment on every PE, the guard words between segments and the untouched tail of
 * its heap. The seed is printed; the same seed replays the same calls. */
#include <limits.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "xpushmem.h"
#include "check.h"

#define SEG 64        /* longs each PE owns on every PE */
#define GUARD 8       /* guard longs after each segment, never written */
#define COLL 64       /* longs of the collective area, per source PE */
#define TAIL 4096     /* bytes at the end of the heap nobody writes */

static uint64_t mix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t below(uint64_t *s, uint64_t n) { return mix(s) % n; }

static int me, npes;
static long invalid_calls, valid_calls, coll_calls;
static uint64_t iter;

/* An invalid call: must return one of the allowed codes (never 0), and leave a message. */
#define BAD(call, ...)                                                                              \
    do {                                                                                            \
        int allowed_[] = {__VA_ARGS__};                                                             \
        xpushmemx_clear_error();                                                                    \
        int rc_ = (call);                                                                           \
        int ok_ = 0;                                                                                \
        for (size_t i_ = 0; i_ < sizeof allowed_ / sizeof allowed_[0]; i_++) ok_ |= rc_ == allowed_[i_]; \
        CHECK(ok_, "iteration %llu: %s returned %d (%s): %s", (unsigned long long)iter, #call, rc_,   \
              xpushmemx_error_name(rc_), xpushmem_last_error());                                    \
        CHECK(xpushmem_last_error()[0] != '\0', "iteration %llu: %s left no message",               \
              (unsigned long long)iter, #call);                                                     \
        invalid_calls++;                                                                            \
    } while (0)

/* A valid call: must return 0. */
#define GOOD(call)                                                                                  \
    do {                                                                                            \
        int rc_ = (call);                                                                           \
        CHECK(rc_ == 0, "iteration %llu: %s returned %d (%s): %s", (unsigned long long)iter, #call,   \
              rc_, xpushmemx_error_name(rc_), xpushmem_last_error());                               \
        valid_calls++;                                                                              \
    } while (0)

static int bad_pe(uint64_t *r) {
    switch (below(r, 6)) {
    case 0: return -1;
    case 1: return npes;
    case 2: return npes + 1 + (int)below(r, 1000);
    case 3: return INT_MAX;
    case 4: return INT_MIN;
    default: return -2 - (int)below(r, 1000);
    }
}

int main(int argc, char **argv) {
    CHECK(argc == 3, "usage: fuzz_native SEED ITERATIONS");
    uint64_t seed = strtoull(argv[1], NULL, 0);
    uint64_t iterations = strtoull(argv[2], NULL, 0);
    OK(xpushmem_init());
    me = xpushmem_my_pe();
    npes = xpushmem_n_pes();
    if (me == 0) printf("fuzz_native seed %llu, %llu iterations per PE, %d PEs\n", (unsigned long long)seed,
                        (unsigned long long)iterations, npes);
    uint64_t own = seed ^ (0xA5A5A5A5ull * (uint64_t)(me + 1)); /* this PE's calls */
    uint64_t common = seed;                                      /* the collectives, the same on every PE */

    size_t stride = SEG + GUARD;
    long *arr = xpushmem_calloc((size_t)npes * stride, sizeof(long));
    long *coll_src = xpushmem_calloc((size_t)npes * COLL, sizeof(long));
    long *coll_dst = xpushmem_calloc((size_t)npes * COLL, sizeof(long));
    CHECK(arr && coll_src && coll_dst, "calloc: %s", xpushmem_last_error());
    char *heap = xpushmemx_heap_base();
    size_t heap_size = xpushmemx_heap_size();
    char *heap_end = heap + heap_size;
    CHECK((char *)(coll_dst + (size_t)npes * COLL) < heap_end - TAIL, "the tail is free");

    /* shadow[t][i]: what my segment on PE t holds */
    long *shadow = calloc((size_t)npes * SEG, sizeof(long));
    long local[4 * SEG], got[4 * SEG];
    CHECK(shadow != NULL, "malloc");
    OK(xpushmem_barrier_all());

    for (iter = 0; iter < iterations; iter++) {
        /* A collective, on every PE at the same iterations. */
        if (below(&common, 64) == 0) {
            int kind = (int)below(&common, 9);
            int root = (int)below(&common, (uint64_t)npes);
            size_t n = 1 + below(&common, COLL);
            uint64_t salt = mix(&common);
            coll_calls++;
            switch (kind) {
            case 0:
                GOOD(xpushmem_barrier_all());
                break;
            case 1: { /* broadcast from root, checked on every PE */
                for (size_t i = 0; i < n; i++) coll_src[i] = (long)(salt + (uint64_t)root * 1000 + i);
                GOOD(xpushmem_barrier_all());
                GOOD(xpushmem_long_broadcast(XPUSHMEM_TEAM_WORLD, coll_dst, coll_src, n, root));
                for (size_t i = 0; i < n; i++)
                    CHECK(coll_dst[i] == (long)(salt + (uint64_t)root * 1000 + i), "iteration %llu: broadcast[%zu]",
                          (unsigned long long)iter, i);
                GOOD(xpushmem_barrier_all());
                break;
            }
            case 2: { /* sum reduction against the sum computed here */
                for (size_t i = 0; i < n; i++) coll_src[i] = (long)((salt >> 8) % 1000) * (me + 1) + (long)i;
                GOOD(xpushmem_long_sum_reduce(XPUSHMEM_TEAM_WORLD, coll_dst, coll_src, n));
                for (size_t i = 0; i < n; i++) {
                    long want = 0;
                    for (int p = 0; p < npes; p++) want += (long)((salt >> 8) % 1000) * (p + 1) + (long)i;
                    CHECK(coll_dst[i] == want, "iteration %llu: sum_reduce[%zu] = %ld, want %ld",
                          (unsigned long long)iter, i, coll_dst[i], want);
                }
                GOOD(xpushmem_barrier_all());
                break;
            }
            case 3: { /* alltoall of n/npes+1 elements per pair */
                size_t k = 1 + n / (size_t)npes;
                for (int p = 0; p < npes; p++)
                    for (size_t i = 0; i < k; i++) coll_src[(size_t)p * k + i] = (long)(salt % 9973) + me * 100 + p * 10000 + (long)i;
                GOOD(xpushmem_long_alltoall(XPUSHMEM_TEAM_WORLD, coll_dst, coll_src, k));
                for (int p = 0; p < npes; p++)
                    for (size_t i = 0; i < k; i++)
                        CHECK(coll_dst[(size_t)p * k + i] == (long)(salt % 9973) + p * 100 + me * 10000 + (long)i,
                              "iteration %llu: alltoall from %d [%zu]", (unsigned long long)iter, p, i);
                GOOD(xpushmem_barrier_all());
                break;
            }
            case 4: { /* bad team handles: a local error on every PE, no communication */
                xpushmem_team_t bad[] = {12345, -7, INT_MAX, INT_MIN};
                xpushmem_team_t t = bad[salt % 4];
                int v = 99;
                BAD(xpushmem_team_my_pe_ex(&v, t), XPUSHMEM_ERROR_INVALID_ARGUMENT);
                CHECK(v == 99, "team_my_pe_ex wrote its output on error");
                BAD(xpushmem_barrier(t), XPUSHMEM_ERROR_INVALID_ARGUMENT);
                BAD(xpushmem_long_broadcast(t, coll_dst, coll_src, n, 0), XPUSHMEM_ERROR_INVALID_ARGUMENT);
                BAD(xpushmem_long_sum_reduce(t, coll_dst, coll_src, n), XPUSHMEM_ERROR_INVALID_ARGUMENT);
                BAD(xpushmem_team_destroy(t), XPUSHMEM_ERROR_INVALID_ARGUMENT);
                break;
            }
            case 5: /* a root outside the team */
                BAD(xpushmem_long_broadcast(XPUSHMEM_TEAM_WORLD, coll_dst, coll_src, n, (salt & 1) ? npes : -1),
                    XPUSHMEM_ERROR_INVALID_PE, XPUSHMEM_ERROR_INVALID_ARGUMENT);
                break;
            case 6: /* collectives that cannot fit: past the heap, overflowing counts */
                BAD(xpushmem_long_alltoall(XPUSHMEM_TEAM_WORLD, coll_dst, coll_src, heap_size),
                    XPUSHMEM_ERROR_OUT_OF_BOUNDS, XPUSHMEM_ERROR_INVALID_ARGUMENT);
                BAD(xpushmem_long_broadcast(XPUSHMEM_TEAM_WORLD, coll_dst, coll_src, SIZE_MAX / 4, root),
                    XPUSHMEM_ERROR_OUT_OF_BOUNDS, XPUSHMEM_ERROR_INVALID_ARGUMENT);
                BAD(xpushmem_long_sum_reduce(XPUSHMEM_TEAM_WORLD, (long *)(heap_end - 8), coll_src, 2),
                    XPUSHMEM_ERROR_OUT_OF_BOUNDS, XPUSHMEM_ERROR_NOT_SYMMETRIC);
                break;
            case 8: { /* collective lengths that differ between PEs: a Mismatch on every PE, then usable */
                size_t mine = me == npes - 1 ? n + 1 : n;
                if (npes > 1) {
                    BAD(xpushmem_long_broadcast(XPUSHMEM_TEAM_WORLD, coll_dst, coll_src, mine, root), XPUSHMEM_ERROR_MISMATCH);
                    BAD(xpushmem_long_sum_reduce(XPUSHMEM_TEAM_WORLD, coll_dst, coll_src, mine), XPUSHMEM_ERROR_MISMATCH);
                }
                GOOD(xpushmem_barrier_all());
                break;
            }
            case 7: { /* allocations: too big, and lengths that differ between PEs */
                CHECK(xpushmem_malloc(heap_size * 2) == NULL &&
                          xpushmem_last_error_code() == XPUSHMEM_ERROR_INVALID_ARGUMENT,
                      "iteration %llu: malloc(2 heaps): %s", (unsigned long long)iter, xpushmem_last_error());
                invalid_calls++;
                void *m = xpushmem_malloc(me == npes - 1 ? 128 : 64);
                if (npes > 1) {
                    CHECK(m == NULL && xpushmem_last_error_code() == XPUSHMEM_ERROR_MISMATCH,
                          "iteration %llu: mismatched malloc: %p %s", (unsigned long long)iter, m, xpushmem_last_error());
                    invalid_calls++;
                } else {
                    CHECK(m != NULL, "malloc(64) at 1 PE");
                    GOOD(xpushmem_free(m));
                }
                long *ok = xpushmem_malloc(64);
                CHECK(ok != NULL, "iteration %llu: malloc after the errors: %s", (unsigned long long)iter,
                      xpushmem_last_error());
                GOOD(xpushmem_free(ok));
                break;
            }
            }
        }

        /* One call of this PE. */
        int t = (int)below(&own, (uint64_t)npes);
        long *seg = arr + (size_t)me * stride; /* my segment, on any PE */
        size_t off = below(&own, SEG);
        size_t len = 1 + below(&own, SEG - off);
        long *sh = shadow + (size_t)t * SEG;
        int cls = (int)below(&own, 20);
        for (size_t i = 0; i < 4 * SEG; i++) local[i] = (long)mix(&own);
        switch (cls) {
        case 0: /* put */
            GOOD(xpushmem_long_put(seg + off, local, len, t));
            memcpy(sh + off, local, len * sizeof(long));
            break;
        case 1: /* p */
            GOOD(xpushmem_long_p(seg + off, local[0], t));
            sh[off] = local[0];
            break;
        case 2: /* get, after quiet */
            GOOD(xpushmem_quiet());
            GOOD(xpushmem_long_get(got, seg + off, len, t));
            CHECK(memcmp(got, sh + off, len * sizeof(long)) == 0, "iteration %llu: get from PE %d differs", (unsigned long long)iter, t);
            break;
        case 3: { /* g */
            GOOD(xpushmem_quiet());
            long v = 0;
            GOOD(xpushmem_long_g_ex(&v, seg + off, t));
            CHECK(v == sh[off], "iteration %llu: g from PE %d: %ld, want %ld", (unsigned long long)iter, t, v, sh[off]);
            break;
        }
        case 4: { /* iput with strides that fit */
            ptrdiff_t dst = 1 + (ptrdiff_t)below(&own, 4), sst = 1 + (ptrdiff_t)below(&own, 4);
            size_t n = 1 + (SEG - 1 - off) / (size_t)dst;
            size_t cap = 1 + below(&own, 8);
            if (n > cap) n = cap;
            GOOD(xpushmem_long_iput(seg + off, local, dst, sst, n, t));
            for (size_t i = 0; i < n; i++) sh[off + i * (size_t)dst] = local[i * (size_t)sst];
            break;
        }
        case 5: { /* iget */
            GOOD(xpushmem_quiet());
            ptrdiff_t dst = 1 + (ptrdiff_t)below(&own, 4), sst = 1 + (ptrdiff_t)below(&own, 4);
            size_t n = 1 + (SEG - 1 - off) / (size_t)sst;
            size_t cap = 1 + below(&own, 8);
            if (n > cap) n = cap;
            memset(got, 0, sizeof got);
            GOOD(xpushmem_long_iget(got, seg + off, dst, sst, n, t));
            for (size_t i = 0; i < n; i++)
                CHECK(got[i * (size_t)dst] == sh[off + i * (size_t)sst],
                      "iteration %llu: iget[%zu] from PE %d (offset %zu, dst %td, sst %td, %zu elements): %ld, want %ld",
                      (unsigned long long)iter, i, t, off, dst, sst, n, got[i * (size_t)dst], sh[off + i * (size_t)sst]);
            break;
        }
        case 6: { /* fetch-add */
            long f = 0, add = (long)(mix(&own) % 1000);
            GOOD(xpushmem_long_atomic_fetch_add_ex(&f, seg + off, add, t));
            CHECK(f == sh[off], "iteration %llu: fetch_add on PE %d fetched %ld, want %ld", (unsigned long long)iter, t, f, sh[off]);
            sh[off] = (long)((unsigned long)sh[off] + (unsigned long)add);
            break;
        }
        case 7: /* zero lengths: success, nothing written */
            GOOD(xpushmem_long_put(seg + off, local, 0, t));
            GOOD(xpushmem_long_get(got, seg + off, 0, t));
            GOOD(xpushmem_long_iput(seg + off, local, 1, 1, 0, t));
            break;
        case 8: { /* bad PE, every family */
            int pe = bad_pe(&own);
            long v = 5;
            BAD(xpushmem_long_put(seg + off, local, len, pe), XPUSHMEM_ERROR_INVALID_PE);
            BAD(xpushmem_long_get(got, seg + off, len, pe), XPUSHMEM_ERROR_INVALID_PE);
            BAD(xpushmem_long_p(seg + off, 1, pe), XPUSHMEM_ERROR_INVALID_PE);
            BAD(xpushmem_long_g_ex(&v, seg + off, pe), XPUSHMEM_ERROR_INVALID_PE);
            CHECK(v == 5, "g_ex wrote its output on error");
            BAD(xpushmem_long_iput(seg + off, local, 1, 1, 1, pe), XPUSHMEM_ERROR_INVALID_PE);
            BAD(xpushmem_long_atomic_add(seg + off, 1, pe), XPUSHMEM_ERROR_INVALID_PE);
            BAD(xpushmem_long_atomic_fetch_add_ex(&v, seg + off, 1, pe), XPUSHMEM_ERROR_INVALID_PE);
            BAD(xpushmem_long_put_signal(seg + off, local, 1, (uint64_t *)(seg + off), 1, XPUSHMEM_SIGNAL_SET, pe),
                XPUSHMEM_ERROR_INVALID_PE);
            break;
        }
        case 9: /* non-symmetric addresses */
            BAD(xpushmem_long_put(local, local, len, t), XPUSHMEM_ERROR_NOT_SYMMETRIC);
            BAD(xpushmem_long_get(got, local, len, t), XPUSHMEM_ERROR_NOT_SYMMETRIC);
            BAD(xpushmem_long_p(shadow, 1, t), XPUSHMEM_ERROR_NOT_SYMMETRIC);
            BAD(xpushmem_long_atomic_add(got, 1, t), XPUSHMEM_ERROR_NOT_SYMMETRIC);
            BAD(xpushmem_long_put((long *)(heap - 64), local, 1, t), XPUSHMEM_ERROR_NOT_SYMMETRIC);
            break;
        case 10: /* NULL pointers */
            BAD(xpushmem_long_put(NULL, local, len, t), XPUSHMEM_ERROR_NOT_SYMMETRIC);
            BAD(xpushmem_long_put(seg + off, NULL, len, t), XPUSHMEM_ERROR_INVALID_ARGUMENT);
            BAD(xpushmem_long_get(NULL, seg + off, len, t), XPUSHMEM_ERROR_INVALID_ARGUMENT);
            BAD(xpushmem_long_get(got, NULL, len, t), XPUSHMEM_ERROR_NOT_SYMMETRIC);
            BAD(xpushmem_long_g_ex(NULL, seg + off, t), XPUSHMEM_ERROR_INVALID_ARGUMENT);
            /* A NULL fetch pointer is documented as "discard the old value": a valid call. */
            GOOD(xpushmem_long_atomic_fetch_add_ex(NULL, seg + off, 3, t));
            sh[off] = (long)((unsigned long)sh[off] + 3ul);
            break;
        case 11: { /* ranges past the end of the heap */
            size_t k = 1 + below(&own, 8);
            long *near_end = (long *)(heap_end - k * sizeof(long));
            BAD(xpushmem_long_put(near_end, local, k + 1 + below(&own, 100), t), XPUSHMEM_ERROR_OUT_OF_BOUNDS);
            BAD(xpushmem_long_get(got, near_end, k + 1, t), XPUSHMEM_ERROR_OUT_OF_BOUNDS);
            BAD(xpushmem_putmem(seg, local, heap_size + 1, t), XPUSHMEM_ERROR_OUT_OF_BOUNDS);
            BAD(xpushmem_long_p((long *)heap_end, 1, t), XPUSHMEM_ERROR_NOT_SYMMETRIC, XPUSHMEM_ERROR_OUT_OF_BOUNDS);
            break;
        }
        case 12: { /* strides that leave the heap or overflow */
            ptrdiff_t huge = (ptrdiff_t)(PTRDIFF_MAX / 8 - (ptrdiff_t)below(&own, 1000));
            BAD(xpushmem_long_iput(seg + off, local, huge, 1, 2 + below(&own, 4), t),
                XPUSHMEM_ERROR_INVALID_ARGUMENT, XPUSHMEM_ERROR_OUT_OF_BOUNDS);
            BAD(xpushmem_long_iget(got, seg + off, 1, huge, 2 + below(&own, 4), t),
                XPUSHMEM_ERROR_INVALID_ARGUMENT, XPUSHMEM_ERROR_OUT_OF_BOUNDS);
            BAD(xpushmem_long_iput(seg + off, local, (ptrdiff_t)(heap_size / 8), 1, 2, t),
                XPUSHMEM_ERROR_OUT_OF_BOUNDS, XPUSHMEM_ERROR_INVALID_ARGUMENT);
            BAD(xpushmem_long_iput(seg + off, local, 0, 1, 2, t), XPUSHMEM_ERROR_INVALID_ARGUMENT);
            BAD(xpushmem_long_iput(seg + off, local, -1 - (ptrdiff_t)below(&own, 5), 1, 2, t),
                XPUSHMEM_ERROR_INVALID_ARGUMENT);
            BAD(xpushmem_long_iget(got, seg + off, 1, 0, 2, t), XPUSHMEM_ERROR_INVALID_ARGUMENT);
            break;
        }
        case 13: /* huge sizes */
            BAD(xpushmem_long_put(seg + off, local, SIZE_MAX / 2 - below(&own, 100), t),
                XPUSHMEM_ERROR_INVALID_ARGUMENT, XPUSHMEM_ERROR_OUT_OF_BOUNDS);
            BAD(xpushmem_long_get(got, seg + off, SIZE_MAX - below(&own, 100), t),
                XPUSHMEM_ERROR_INVALID_ARGUMENT, XPUSHMEM_ERROR_OUT_OF_BOUNDS);
            BAD(xpushmem_getmem(got, seg, heap_size + 1 + below(&own, 1000), t), XPUSHMEM_ERROR_OUT_OF_BOUNDS);
            break;
        default: /* more valid puts and fetch-adds: most calls are valid */
            GOOD(xpushmem_long_put(seg + off, local + 1, len, t));
            memcpy(sh + off, local + 1, len * sizeof(long));
            break;
        }
        if (cls >= 8 && cls <= 13) {
            /* The invalid calls changed nothing: my segment on PE t is still its shadow. */
            GOOD(xpushmem_quiet());
            GOOD(xpushmem_long_get(got, seg, SEG, t));
            for (size_t i = 0; i < SEG; i++)
                CHECK(got[i] == sh[i], "iteration %llu: invalid calls of class %d changed element %zu on PE %d",
                      (unsigned long long)iter, cls, i, t);
        }
    }

    /* Closing integrity check: my segment on every PE, the guards, the heap's tail. */
    OK(xpushmem_barrier_all());
    for (int t = 0; t < npes; t++) {
        OK(xpushmem_long_get(got, arr + (size_t)me * stride, SEG + GUARD, t));
        CHECK(memcmp(got, shadow + (size_t)t * SEG, SEG * sizeof(long)) == 0, "final: my segment on PE %d differs", t);
        for (size_t i = SEG; i < SEG + GUARD; i++) CHECK(got[i] == 0, "final: guard %zu after my segment on PE %d = %ld", i - SEG, t, got[i]);
    }
    for (size_t i = 0; i < TAIL; i++) CHECK(heap_end[-(ptrdiff_t)TAIL + (ptrdiff_t)i] == 0, "final: heap tail byte %zu written", i);
    OK(xpushmem_barrier_all());
    printf("fuzz_native PE %d: %ld calls checked (%ld invalid, %ld valid), %ld collective steps\n", me,
           invalid_calls + valid_calls, invalid_calls, valid_calls, coll_calls);
    OK(xpushmem_finalize());
    printf("fuzz_native OK on PE %d of %d\n", me, npes);
    free(shadow);
    return 0;
}

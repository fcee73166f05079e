/* Mismatched collectives through the C ABI (issue 14, item 1): PE 1 calls xpushmem_malloc(4096) while the others
 * call xpushmem_barrier_all(); then PE 0 calls a sum reduction and then a broadcast while the others are in a
 * barrier. Every PE must get XPUSHMEM_ERROR_MISMATCH with a message naming both calls; a correct reduction
 * right after is checked, and every PE finalizes successfully.
 * Prints "native_mismatch OK on PE <me> of <n>" at the end. */
#include <stdint.h>
#include <stddef.h>
#include "xpushmem.h"
#include "check.h"

/* The last error must be a mismatch naming both calls. */
static void named_both(int rc, const char *a, const char *b, const char *what) {
    CHECK(rc == XPUSHMEM_ERROR_MISMATCH, "%s: returned %d (%s), expected a mismatch; last error: %s", what, rc,
          xpushmemx_error_name(rc), xpushmem_last_error());
    const char *m = xpushmem_last_error();
    CHECK(strstr(m, a) != NULL && strstr(m, b) != NULL, "%s: message lacks \"%s\" or \"%s\": %s", what, a, b, m);
}

int main(void) {
    OK(xpushmem_init());
    int me = xpushmem_my_pe(), npes = xpushmem_n_pes();

    /* A barrier meets an allocation. */
    if (me == 1) {
        void *p = xpushmem_malloc(4096);
        CHECK(p == NULL, "malloc against a barrier returned %p", p);
        named_both(xpushmem_last_error_code(), "malloc(4096 elements of 1 bytes, align 1)", "barrier_all()",
                   "malloc vs barrier_all");
    } else {
        named_both(xpushmem_barrier_all(), "malloc(4096 elements of 1 bytes, align 1)", "barrier_all()",
                   "barrier_all vs malloc");
    }

    long *src = (long *)xpushmem_malloc(8 * sizeof(long));
    long *dst = (long *)xpushmem_malloc(8 * sizeof(long));
    CHECK(src && dst, "malloc after the mismatch: %s", xpushmem_last_error());
    for (int i = 0; i < 8; i++) src[i] = me + 1 + i;
    OK(xpushmem_barrier_all());

    /* A reduction meets a barrier. */
    int rc = me == 0 ? xpushmem_long_sum_reduce(XPUSHMEM_TEAM_WORLD, dst, src, 8) : xpushmem_barrier_all();
    named_both(rc, "reduce(type int64, nelems 8, op sum", "barrier_all()", "sum_reduce vs barrier_all");

    /* A broadcast meets a barrier. */
    rc = me == 0 ? xpushmem_long_broadcast(XPUSHMEM_TEAM_WORLD, dst, src, 8, 0) : xpushmem_barrier_all();
    named_both(rc, "broadcast(type int64, nelems 8, root 0", "barrier_all()", "broadcast vs barrier_all");

    /* Still usable: the reduction by everyone gives the sum over PEs of (pe + 1 + i). */
    OK(xpushmem_long_sum_reduce(XPUSHMEM_TEAM_WORLD, dst, src, 8));
    for (int i = 0; i < 8; i++) {
        long want = (long)npes * (npes + 1) / 2 + (long)npes * i;
        CHECK(dst[i] == want, "sum_reduce after the mismatches: dst[%d] = %ld, expected %ld", i, dst[i], want);
    }
    xpushmem_free(dst);
    xpushmem_free(src);
    OK(xpushmem_finalize());
    printf("native_mismatch OK on PE %d of %d\n", me, npes);
    return 0;
}

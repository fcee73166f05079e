/* Contexts as completion domains (OpenSHMEM 1.6): shmem_ctx_quiet(ctx) completes the operations issued on ctx,
 * shmem_ctx_fence(ctx) orders them, shmem_ctx_destroy quiets its context first, and another context's quiet (or the
 * default context's) need not complete them. With XPUSHMEM_TRANSPORT=deferred (puts are queued until completed)
 * the program also checks that a put of context B is still missing at its target after context A's quiet and the
 * default context's: an implementation that completes every context on any quiet fails there. Every value checked
 * is one the program wrote; at least 2 PEs, each putting to its right neighbour. The variables are on the
 * symmetric heap, and one is a global (the symmetric data segment). */
#include <shmem.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static long *sig;
static long g; /* a global: symmetric data object in the data segment */

/* Tell the right neighbour that round `r` was issued (on the default context) and wait for the left one's. */
static void round_done(long r, int right) {
    shmem_long_atomic_set(sig, r, right);
    shmem_quiet();
    shmem_long_wait_until(sig, SHMEM_CMP_EQ, r);
}

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    CHECK(n >= 2, "needs at least 2 PEs, has %d", n);
    int right = (me + 1) % n, left = (me + n - 1) % n;
    long *v = shmem_calloc(6, sizeof(long));
    CHECK(v != NULL, "shmem_calloc");
    long *x = &v[0], *y = &v[1], *z = &v[2], *f = &v[3], *flag = &v[4];
    sig = &v[5];
    shmem_barrier_all();
    const char *tr = getenv("XPUSHMEM_TRANSPORT");
    int deferred = tr != NULL && strcmp(tr, "deferred") == 0;

    shmem_ctx_t a, b;
    CHECK(shmem_ctx_create(SHMEM_CTX_PRIVATE, &a) == 0, "create A (private)");
    CHECK(shmem_ctx_create(SHMEM_CTX_SERIALIZED | SHMEM_CTX_NOSTORE, &b) == 0, "create B (serialized, nostore)");
    CHECK(a != b && a != SHMEM_CTX_DEFAULT && b != SHMEM_CTX_DEFAULT, "distinct contexts");

    /* Round 1: a put on each context, only A quieted (and the default context, by round_done). */
    shmem_ctx_long_p(a, x, 100 + me, right);
    shmem_ctx_long_p(b, y, 200 + me, right);
    shmem_ctx_long_p(b, &g, 500 + me, right);
    shmem_ctx_quiet(a);
    round_done(1, right);
    CHECK(*x == 100 + left, "A's put completed by A's quiet: x = %ld, want %d", *x, 100 + left);
    if (deferred) {
        CHECK(*y == 0, "B's put must still be queued after the quiet of A and of the default context: y = %ld", *y);
        CHECK(g == 0, "B's put to a global must still be queued: g = %ld", g);
    }
    shmem_barrier_all(); /* everyone has looked at y before B's put may land */

    /* Round 2: B's own quiet completes it. */
    shmem_ctx_quiet(b);
    round_done(2, right);
    CHECK(*y == 200 + left, "B's put completed by B's quiet: y = %ld, want %d", *y, 200 + left);
    CHECK(g == 500 + left, "B's put to a global completed by B's quiet: g = %ld, want %d", g, 500 + left);

    /* Round 3: a fence on A orders A's put before A's flag. */
    shmem_ctx_long_p(a, f, 300 + me, right);
    shmem_ctx_fence(a);
    shmem_ctx_long_atomic_set(a, flag, 1, right);
    shmem_ctx_quiet(a);
    shmem_long_wait_until(flag, SHMEM_CMP_EQ, 1);
    CHECK(*f == 300 + left, "A's fence ordered its put before its flag: f = %ld, want %d", *f, 300 + left);

    /* Round 4: destroying B completes B's last put. */
    shmem_ctx_long_put(b, z, (long[]){400L + me}, 1, right);
    shmem_ctx_destroy(b);
    round_done(4, right);
    CHECK(*z == 400 + left, "B's put completed by shmem_ctx_destroy: z = %ld, want %d", *z, 400 + left);

    shmem_ctx_destroy(a);
    shmem_barrier_all();
    shmem_free(v);
    PASS("ctx_domains");
    shmem_finalize();
    return 0;
}

/* Global and static variables are symmetric data objects (OpenSHMEM "Memory Model"): puts, gets, atomics,
 * signals, waits, locks and collectives on them, with no symmetric heap allocation at all, at addresses that differ
 * between PEs (PIE, ASLR). */
#include "check.h"
#include <string.h>

#define N 64
long data[N];                       /* .bss */
int initialised[4] = {7, 8, 9, 10}; /* .data: its initial value must survive init */
static long counter;                /* static, file scope */
long lock;                          /* a lock in a global */
uint64_t sig;
double dsum[N], dsrc[N];
long collected[N * 8];

static int bump(int pe) {
    static int calls; /* static inside a function */
    shmem_int_atomic_add(&calls, 1, pe);
    shmem_barrier_all();
    return calls;
}

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    int right = (me + 1) % npes, left = (me + npes - 1) % npes;

    CHECK(initialised[0] == 7 && initialised[3] == 10, "initial value lost: %d %d", initialised[0], initialised[3]);
    CHECK(shmem_addr_accessible(data, right), "a global is not accessible on PE %d", right);
    CHECK(shmem_ptr(data, me) == (void *)data, "shmem_ptr to self %p, expected %p", shmem_ptr(data, me), (void *)data);

    /* put / get on a global array */
    long src[N];
    for (int i = 0; i < N; i++) src[i] = me * 1000 + i;
    shmem_long_put(data, src, N, right);
    shmem_barrier_all();
    for (int i = 0; i < N; i++) CHECK(data[i] == left * 1000 + i, "data[%d] = %ld", i, data[i]);
    long got[N];
    shmem_long_get(got, data, N, right);
    for (int i = 0; i < N; i++) CHECK(got[i] == me * 1000 + i, "got[%d] = %ld", i, got[i]);
    CHECK(shmem_int_g(&initialised[2], right) == 9, "g of an initialised global");
    shmem_barrier_all();

    /* atomics on a static */
    shmem_long_atomic_add(&counter, me + 1, 0);
    shmem_barrier_all();
    if (me == 0) CHECK(counter == (long)npes * (npes + 1) / 2, "counter %ld", counter);
    CHECK(shmem_long_atomic_fetch(&counter, 0) == (long)npes * (npes + 1) / 2, "fetch of a static");
    shmem_barrier_all();

    /* a lock in a global protecting a read-modify-write on a global */
    for (int i = 0; i < 10; i++) {
        shmem_set_lock(&lock);
        long v = shmem_long_g(&data[0], 0);
        shmem_long_p(&data[0], v + 1, 0);
        shmem_quiet();
        shmem_clear_lock(&lock);
    }
    shmem_barrier_all();
    if (me == 0) CHECK(data[0] == (npes - 1) * 1000 + 10L * npes, "locked counter %ld", data[0]);
    shmem_barrier_all();

    /* put with signal into globals, waited on locally */
    long payload = 42 + me;
    shmem_long_put_signal(&data[1], &payload, 1, &sig, 1, SHMEM_SIGNAL_ADD, right);
    shmem_signal_wait_until(&sig, SHMEM_CMP_GE, 1);
    CHECK(data[1] == 42 + left, "signalled payload %ld", data[1]);
    shmem_barrier_all();

    /* a static inside a function */
    int calls = bump(0);
    if (me == 0) CHECK(calls == npes, "function static %d", calls);

    /* collectives on static arrays */
    for (int i = 0; i < N; i++) dsrc[i] = me + i * 0.5;
    CHECK(shmem_double_sum_reduce(SHMEM_TEAM_WORLD, dsum, dsrc, N) == 0, "sum_reduce");
    for (int i = 0; i < N; i++) {
        double want = (double)npes * (npes - 1) / 2 + npes * i * 0.5;
        CHECK(dsum[i] == want, "dsum[%d] = %g, want %g", i, dsum[i], want);
    }
    static long mine[2];
    mine[0] = me;
    mine[1] = -me;
    CHECK(shmem_long_fcollect(SHMEM_TEAM_WORLD, collected, mine, 2) == 0, "fcollect");
    for (int p = 0; p < npes; p++) CHECK(collected[2 * p] == p && collected[2 * p + 1] == -p, "collected[%d]", p);
    shmem_barrier_all();

    /* Everything above ran with the globals at different addresses on different PEs (a PIE under ASLR): each PE's
     * address of `data`, collected; when the kernel randomises (randomize_va_space != 0) they are not all equal. */
    static long where[1], wheres[64];
    where[0] = (long)(uintptr_t)data;
    CHECK(npes <= 64 && shmem_long_fcollect(SHMEM_TEAM_WORLD, wheres, where, 1) == 0, "fcollect of addresses");
    FILE *aslr = fopen("/proc/sys/kernel/randomize_va_space", "r");
    int randomised = 0;
    if (aslr) {
        randomised = fgetc(aslr) != '0';
        fclose(aslr);
    }
    int differ = 0;
    for (int p = 1; p < npes; p++) differ |= wheres[p] != wheres[0];
    CHECK(npes == 1 || !randomised || differ, "every PE has data at %#lx: not a randomised PIE", (unsigned long)wheres[0]);
    shmem_barrier_all();

#ifdef XPUSHMEM_SHMEM_H /* xpushmem's extensions (the Open MPI cross-check skips this part) */
    /* a local variable is not symmetric: the call reports it (return mode) */
    CHECK(xpushmemx_get_error_mode() == XPUSHMEMX_ERROR_MODE_ABORT, "default error mode");
    xpushmemx_set_error_mode(XPUSHMEMX_ERROR_MODE_RETURN);
    long local = 0;
    shmem_long_p(&local, 1, right);
    CHECK(xpushmem_last_error_code() != 0 && strstr(xpushmem_last_error(), "is not symmetric") != NULL,
          "stack address accepted: %s", xpushmem_last_error());
    CHECK(strstr(xpushmem_last_error(), "shared libraries") != NULL, "message: %s", xpushmem_last_error());
    CHECK(!shmem_addr_accessible(&local, right), "a stack address is accessible");
    /* nor is a thread-local */
    static _Thread_local long tl;
    char addr[32];
    snprintf(addr, sizeof addr, "%p", (void *)&tl);
    shmem_long_p(&tl, 1, right);
    CHECK(strstr(xpushmem_last_error(), addr) != NULL && strstr(xpushmem_last_error(), "is not symmetric") != NULL,
          "thread-local %s accepted: %s", addr, xpushmem_last_error());
    CHECK(!shmem_addr_accessible(&tl, right) && shmem_ptr(&tl, right) == NULL, "a thread-local is accessible");

#endif
    PASS("globals");
    shmem_finalize();
    return 0;
}

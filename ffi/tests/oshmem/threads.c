/* SHMEM_THREAD_MULTIPLE: several threads of every PE make atomics, puts and gets on global variables at once. */
#include "check.h"
#include <pthread.h>

#define THREADS 4
#define ITERS 200

long total;                     /* on PE 0: incremented by every thread of every PE */
long slots[THREADS * 64];       /* one slot per (PE, thread), written remotely on the right neighbour */

static void *work(void *arg) {
    int t = (int)(long)arg, me = shmem_my_pe(), npes = shmem_n_pes();
    for (int i = 0; i < ITERS; i++) {
        shmem_long_atomic_inc(&total, 0);
        long v = (long)me * 1000000 + t * 1000 + i;
        shmem_long_p(&slots[me % 64 * THREADS + t], v, (me + 1) % npes);
        shmem_quiet();
        long back = shmem_long_g(&slots[me % 64 * THREADS + t], (me + 1) % npes);
        if (back != v) return (void *)1;
    }
    return NULL;
}

int main(void) {
    int provided = -1;
    CHECK(shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided) == 0, "init_thread");
    CHECK(provided == SHMEM_THREAD_MULTIPLE, "provided %d", provided);
    int npes = shmem_n_pes();
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, work, (void *)t) == 0, "pthread_create");
    for (int t = 0; t < THREADS; t++) {
        void *r;
        pthread_join(th[t], &r);
        CHECK(r == NULL, "thread %d read back another value", t);
    }
    shmem_barrier_all();
    if (shmem_my_pe() == 0) CHECK(total == (long)THREADS * ITERS * npes, "total %ld", total);
    PASS("threads");
    shmem_finalize();
    return 0;
}

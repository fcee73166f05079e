/* Atomic counter on PE 0 and a lock-protected critical section. */
#include <stdio.h>
#include <shmem.h>

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    int *counter = shmem_calloc(1, sizeof(int));
    long *lock = shmem_calloc(1, sizeof(long));
    long *shared = shmem_calloc(1, sizeof(long));
    for (int i = 0; i < 100; i++) shmem_int_atomic_inc(counter, 0);
    int ticket = shmem_atomic_fetch_add(counter, 1, 0); /* generic */
    (void)ticket;
    for (int i = 0; i < 20; i++) {
        shmem_set_lock(lock);
        long v = shmem_long_g(shared, 0); /* non-atomic read-modify-write, made safe by the lock */
        shmem_long_p(shared, v + 1, 0);
        shmem_quiet();
        shmem_clear_lock(lock);
    }
    shmem_barrier_all();
    if (me == 0) {
        if (*counter != 101 * npes) { printf("counter %d, expected %d\n", *counter, 101 * npes); return 1; }
        if (*shared != 20L * npes) { printf("locked counter %ld, expected %d\n", *shared, 20 * npes); return 1; }
    }
    if (shmem_test_lock(lock) == 0) shmem_clear_lock(lock); /* the lock is free again: test_lock takes it */
    shmem_barrier_all();
    shmem_free(shared);
    shmem_free(lock);
    shmem_free(counter);
    printf("counter OK on PE %d of %d\n", me, npes);
    shmem_finalize();
    return 0;
}

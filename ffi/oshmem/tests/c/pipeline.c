/* A put_signal pipeline: PE 0 produces chunks, each PE forwards them to the next with put_signal; the consumer
 * waits with signal_wait_until and wait_until. */
#include <stdint.h>
#include <stdio.h>
#include <shmem.h>

#define CHUNK 256
#define CHUNKS 16

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    double *buf = shmem_calloc(CHUNKS * CHUNK, sizeof(double));
    uint64_t *sig = shmem_calloc(1, sizeof(uint64_t));
    int *done = shmem_calloc(1, sizeof(int));
    double local[CHUNK];
    for (int c = 0; c < CHUNKS; c++) {
        if (me == 0) {
            for (int i = 0; i < CHUNK; i++) local[i] = c * 1000.0 + i;
        } else {
            shmem_signal_wait_until(sig, SHMEM_CMP_GE, (uint64_t)c + 1);
            for (int i = 0; i < CHUNK; i++) local[i] = buf[c * CHUNK + i] + 1.0;
        }
        if (me + 1 < npes)
            shmem_double_put_signal(&buf[c * CHUNK], local, CHUNK, sig, 1, SHMEM_SIGNAL_ADD, me + 1);
    }
    if (me == npes - 1) {
        for (int c = 0; c < CHUNKS; c++)
            for (int i = 0; i < CHUNK; i++)
                if (buf[c * CHUNK + i] != c * 1000.0 + i + (npes - 2)) { printf("bad [%d][%d]\n", c, i); return 1; }
        shmem_int_atomic_set(done, 1, 0);
    }
    if (me == 0) shmem_wait_until(done, SHMEM_CMP_EQ, 1); /* generic */
    shmem_barrier_all();
    shmem_free(done);
    shmem_free(sig);
    shmem_free(buf);
    printf("pipeline OK on PE %d of %d\n", me, npes);
    shmem_finalize();
    return 0;
}

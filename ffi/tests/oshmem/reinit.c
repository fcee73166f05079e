/* OpenSHMEM 1.6: the library initialised again after its last shmem_finalize ("may be re-initialized with a
 * subsequent call to an initialization routine"). Three rounds of init, communication (a put to the right
 * neighbour into the heap and into a global, a sum reduction), finalize; each round's values differ, so a value
 * left over from an earlier round is caught. Between the rounds the library reports itself uninitialised. */
#include "check.h"

static long global_box;

static int round_trip(int round) {
    int me = shmem_my_pe(), npes = shmem_n_pes(), right = (me + 1) % npes, left = (me + npes - 1) % npes;
    long *box = shmem_malloc(2 * sizeof(long)), *sum = shmem_malloc(sizeof(long));
    CHECK(box != NULL && sum != NULL, "round %d: shmem_malloc", round);
    box[0] = box[1] = -1;
    global_box = -1;
    shmem_barrier_all();
    long v = 1000L * round + me;
    shmem_long_p(&box[1], v, right);
    shmem_long_put(&global_box, &v, 1, right);
    shmem_barrier_all();
    long want = 1000L * round + left;
    CHECK(box[1] == want && box[0] == -1, "round %d: heap put from PE %d: %ld, want %ld", round, left, box[1], want);
    CHECK(global_box == want, "round %d: global put from PE %d: %ld, want %ld", round, left, global_box, want);
    CHECK(shmem_long_sum_reduce(SHMEM_TEAM_WORLD, sum, &box[1], 1) == 0, "round %d: sum_reduce", round);
    long total = 0;
    for (int p = 0; p < npes; p++) total += 1000L * round + p;
    CHECK(*sum == total, "round %d: sum %ld, want %ld", round, *sum, total);
    shmem_free(sum);
    shmem_free(box);
    return npes;
}

int main(void) {
    int npes = -1, init = -1;
    for (int round = 1; round <= 3; round++) {
        if (round == 2) {
            int provided = -1;
            CHECK(shmem_init_thread(SHMEM_THREAD_SERIALIZED, &provided) == 0, "round 2: shmem_init_thread");
        } else {
            shmem_init();
        }
        shmem_query_initialized(&init);
        CHECK(init == 1, "round %d: not initialised after init", round);
        int n = round_trip(round);
        CHECK(npes == -1 || n == npes, "round %d: %d PEs, %d before", round, n, npes);
        npes = n;
        if (round == 3) PASS("reinit");
        shmem_finalize();
        shmem_query_initialized(&init);
        CHECK(init == 0, "after round %d's finalize: initialised", round);
    }
    return 0;
}

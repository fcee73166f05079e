/* The classic OpenSHMEM programs, on global and static variables only (no symmetric heap allocation): hello,
 * pi by reduction, circular shift, ping-pong, strided puts, a barrier loop, non-blocking fetching atomics. */
#include "check.h"
#include <math.h>

#define N 32
#define INTERVALS 100000
#define ROUNDS 50

static double part, pi;                 /* pi by reduction */
int shift_src[N], shift_dst[N];         /* circular shift */
long ping, pong;                        /* ping-pong flags */
static long strided[3 * N];             /* strided puts */
static long arrivals;                   /* barrier loop */
static long ticket;                     /* nbi atomics */
static long fetched[N];

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    CHECK(me >= 0 && me < npes && npes >= 1, "hello: PE %d of %d", me, npes);

    /* pi: the midpoint rule over INTERVALS, interleaved over the PEs, summed by a reduction */
    double h = 1.0 / INTERVALS, local = 0, serial = 0;
    for (int i = 0; i < INTERVALS; i++) {
        double x = h * (i + 0.5), f = 4.0 / (1.0 + x * x);
        serial += f;
        if (i % npes == me) local += f;
    }
    part = local * h;
    CHECK(shmem_double_sum_reduce(SHMEM_TEAM_WORLD, &pi, &part, 1) == 0, "sum_reduce");
    CHECK(fabs(pi - serial * h) < 1e-12 && fabs(pi - 3.14159265358979323846) < 1e-9, "pi = %.15f, serial %.15f", pi, serial * h);

    /* circular shift */
    for (int i = 0; i < N; i++) shift_src[i] = me * N + i;
    shmem_barrier_all();
    shmem_int_put(shift_dst, shift_src, N, (me + 1) % npes);
    shmem_barrier_all();
    int left = (me + npes - 1) % npes;
    for (int i = 0; i < N; i++) CHECK(shift_dst[i] == left * N + i, "shift_dst[%d] = %d", i, shift_dst[i]);

    /* ping-pong between PE 0 and the last PE */
    int other = npes - 1;
    if (npes > 1 && (me == 0 || me == other)) {
        for (long r = 1; r <= ROUNDS; r++) {
            if (me == 0) {
                shmem_long_atomic_set(&ping, r, other);
                shmem_long_wait_until(&pong, SHMEM_CMP_EQ, r);
            } else {
                shmem_long_wait_until(&ping, SHMEM_CMP_EQ, r);
                shmem_long_atomic_set(&pong, r, 0);
            }
        }
        CHECK((me == 0 ? pong : ping) == ROUNDS, "ping-pong ended at %ld", me == 0 ? pong : ping);
    }
    shmem_barrier_all();

    /* strided puts: every third element of the right neighbour's array, from every other local element */
    long from[2 * N];
    for (int i = 0; i < 2 * N; i++) from[i] = (i % 2 == 0) ? me * 1000 + i / 2 : -1;
    shmem_long_iput(strided, from, 3, 2, N, (me + 1) % npes);
    shmem_barrier_all();
    for (int i = 0; i < 3 * N; i++) {
        long want = (i % 3 == 0) ? left * 1000 + i / 3 : 0;
        CHECK(strided[i] == want, "strided[%d] = %ld, want %ld", i, strided[i], want);
    }
    long back[N];
    shmem_long_iget(back, strided, 1, 3, N, (me + 1) % npes);
    for (int i = 0; i < N; i++) CHECK(back[i] == me * 1000 + i, "iget back[%d] = %ld", i, back[i]);
    shmem_barrier_all();

    /* barrier loop: after barrier k every PE has arrived k times */
    for (int k = 1; k <= ROUNDS; k++) {
        shmem_long_atomic_inc(&arrivals, 0);
        shmem_barrier_all();
        long seen = shmem_long_atomic_fetch(&arrivals, 0);
        CHECK(seen >= (long)k * npes && seen <= (long)(k + 1) * npes, "round %d: %ld arrivals", k, seen);
        shmem_barrier_all();
    }

    /* non-blocking fetching atomics: tickets from PE 0's counter, complete after quiet, all distinct */
    for (int i = 0; i < N; i++) shmem_long_atomic_fetch_add_nbi(&fetched[i], &ticket, 1, 0);
    shmem_quiet();
    for (int i = 1; i < N; i++) CHECK(fetched[i] != fetched[i - 1], "duplicate ticket %ld", fetched[i]);
    shmem_barrier_all();
    if (me == 0) CHECK(ticket == (long)N * npes, "ticket %ld, want %d", ticket, N * npes);

    PASS("classic");
    shmem_finalize();
    return 0;
}

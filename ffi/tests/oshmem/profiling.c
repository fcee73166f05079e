/* The profiling interface (OpenSHMEM 1.5, annex "Profiling Interface"), seen from a program linked with the tool
 * of profiling_tool.c: every call of a routine the tool defines reaches the tool (typed and C11-generic calls
 * alike) and, through its pshmem_* name, the library, with the library's results; the library never calls the
 * standard names itself (the counts are exact); shmem_pcontrol levels switch the counting off and on; the
 * pshmem_* names called directly bypass the tool; pshmem.h's inline routines work. */
#include <pshmem.h>
#include "check.h"
#include "profiling_tool.h"

#define N 64
#define ROUNDS 5

static char out[N], in[N];  /* putmem: from each PE to its right neighbour */
static int counter;         /* fetch-add on PE 0 */
static int fetched[4 * ROUNDS];
static long value;          /* g from the left neighbour */
static int one, total;      /* sum reduction */
static long double ld;      /* pshmem_longdouble_p */

/* One round of every intercepted call; `round` makes each round's data different. */
static void calls(int round, int me, int npes, int *fetched_slot) {
    int right = (me + 1) % npes, left = (me + npes - 1) % npes;
    for (int i = 0; i < N; i++) out[i] = (char)(me * 31 + round * 7 + i);
    value = me * 1000L + round;
    shmem_barrier_all();
    shmem_putmem(in, out, N, right);
    *fetched_slot = shmem_int_atomic_fetch_add(&counter, me + 1, 0);
    shmem_barrier_all();
    for (int i = 0; i < N; i++)
        CHECK(in[i] == (char)(left * 31 + round * 7 + i), "round %d: in[%d] = %d", round, i, in[i]);
    long got = shmem_long_g(&value, left);
    CHECK(got == left * 1000L + round, "round %d: g from PE %d = %ld", round, left, got);
    one = me + round;
    CHECK(shmem_int_sum_reduce(SHMEM_TEAM_WORLD, &total, &one, 1) == 0, "sum_reduce");
    CHECK(total == npes * (npes - 1) / 2 + npes * round, "round %d: sum %d", round, total);
}

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes();
    struct tool_counts c = tool_counts();
    CHECK(c.init == 1 && c.level == 1, "init counted %ld times, level %d", c.init, c.level);
    CHECK(pshmem_my_pe() == me && pshmem_n_pes() == npes, "pshmem_my_pe/n_pes");

    /* Level 1 (the default): every call is counted, exactly once. */
    int nf = 0;
    for (int r = 0; r < ROUNDS; r++) calls(r, me, npes, &fetched[nf++]);
    /* The C11 generic form resolves to the typed routine, so the tool sees it too. */
    fetched[nf++] = shmem_atomic_fetch_add(&counter, me + 1, 0);
    shmem_barrier_all();
    c = tool_counts();
    CHECK(c.barrier_all == 2 * ROUNDS + 1, "barrier_all counted %ld", c.barrier_all);
    CHECK(c.putmem == ROUNDS && c.putmem_bytes == (long)ROUNDS * N, "putmem %ld (%ld bytes)", c.putmem, c.putmem_bytes);
    CHECK(c.int_fetch_add == ROUNDS + 1, "int_atomic_fetch_add counted %ld", c.int_fetch_add);
    CHECK(c.long_g == ROUNDS && c.int_sum_reduce == ROUNDS, "long_g %ld, int_sum_reduce %ld", c.long_g, c.int_sum_reduce);
    CHECK(c.malloc == 0 && c.finalize == 0, "malloc %ld, finalize %ld", c.malloc, c.finalize);

    /* Level 0: nothing is counted, and the calls still work. */
    shmem_pcontrol(0);
    for (int r = ROUNDS; r < 2 * ROUNDS; r++) calls(r, me, npes, &fetched[nf++]);
    void *p = shmem_malloc(64);
    CHECK(p != NULL, "shmem_malloc");
    struct tool_counts off = tool_counts();
    CHECK(off.level == 0 && off.barrier_all == c.barrier_all && off.putmem == c.putmem &&
              off.int_fetch_add == c.int_fetch_add && off.long_g == c.long_g && off.malloc == 0,
          "counted while disabled: barrier_all %ld, putmem %ld, fetch_add %ld, malloc %ld", off.barrier_all,
          off.putmem, off.int_fetch_add, off.malloc);

    /* Level 1 again, then 2 (flush): counted again. */
    shmem_pcontrol(1);
    calls(2 * ROUNDS, me, npes, &fetched[nf++]);
    shmem_pcontrol(2);
    shmem_free(p);
    c = tool_counts();
    CHECK(c.level == 2 && c.flushes == 1, "level %d, flushes %ld", c.level, c.flushes);
    CHECK(c.barrier_all == off.barrier_all + 2 && c.putmem == off.putmem + 1 && c.int_fetch_add == off.int_fetch_add + 1,
          "after re-enabling: barrier_all %ld, putmem %ld, fetch_add %ld", c.barrier_all, c.putmem, c.int_fetch_add);

    /* A tool-defined level with extra arguments: they reach the tool's shmem_pcontrol. */
    int marker = 0;
    shmem_pcontrol(3, &marker, 4242);
    CHECK(marker == 4242, "shmem_pcontrol's extra arguments: marker %d", marker);
    shmem_pcontrol(1);
    pshmem_pcontrol(7); /* the library's: a no-op */
    CHECK(tool_counts().level == 1, "pshmem_pcontrol reached the tool");

    /* pshmem_* called directly bypass the tool. */
    long before = tool_counts().barrier_all;
    pshmem_barrier_all();
    pshmem_putmem(in, out, N, me);
    pshmem_barrier_all();
    CHECK(tool_counts().barrier_all == before && tool_counts().putmem == c.putmem, "pshmem_* calls were counted");

    /* pshmem.h's inline routines (long double p and g). */
    ld = 0;
    pshmem_barrier_all();
    pshmem_longdouble_p(&ld, (long double)me + 0.25L, (me + 1) % npes);
    pshmem_barrier_all();
    int left = (me + npes - 1) % npes;
    CHECK(ld == (long double)left + 0.25L, "pshmem_longdouble_p");
    CHECK(pshmem_longdouble_g(&ld, left) == (long double)((left + npes - 1) % npes) + 0.25L, "pshmem_longdouble_g");
    pshmem_barrier_all();

    /* The fetch-adds: PE 0's counter is the sum of every PE's adds, and the values fetched are consistent. */
    long adds = (long)nf * npes * (npes + 1) / 2;
    if (me == 0) CHECK(counter == adds, "counter %d, expected %ld", counter, adds);
    for (int i = 0; i < nf; i++)
        CHECK(fetched[i] >= 0 && fetched[i] + me + 1 <= adds, "fetched[%d] = %d", i, fetched[i]);
    for (int i = 1; i < nf; i++) CHECK(fetched[i] > fetched[i - 1], "fetches not increasing: %d then %d", fetched[i - 1], fetched[i]);

    PASS("profiling");
    shmem_finalize();
    return 0;
}

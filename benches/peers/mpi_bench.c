/* Peer benchmark: Open MPI one-sided and collectives running the operations of xpushmem-perf with the same sizes,
 * iteration plan, validation and CSV output.
 *
 *   --win shared (default): RMA on MPI_Win_allocate_shared (Open MPI osc sm), impl "mpi-shared"
 *   --win alloc:            RMA on MPI_Win_allocate (osc rdma over shared memory by Debian's defaults), impl "mpi-alloc"
 * RMA runs in one passive-target epoch (MPI_Win_lock_all); each put/get/atomic is completed with MPI_Win_flush.
 * Synchronisation and collectives (impl "mpi"): MPI_Barrier (barrier_all, team_barrier on a duplicate of
 * MPI_COMM_WORLD), MPI_Bcast (bcast), MPI_Alltoall (alltoall), MPI_Alltoallv with uniform counts (alltoallv),
 * MPI_Allgather (fcollect), MPI_Allreduce(MPI_SUM, int64) (reduce_sum); collectives are timed OSU style, each call
 * alone with a barrier between calls, slowest rank.
 *
 * Build: mpicc -O2 -o mpi_bench mpi_bench.c
 * Run:   mpirun -n 2 ./mpi_bench [BENCH|GROUP ...] [--win shared|alloc] [options]   (see common.h)
 */
#include "common.h"
#include <mpi.h>

static opts_t O;
static int me, np;
static MPI_Win win;
static MPI_Comm team;
static unsigned char *A, *B; /* A: window memory (RMA) / collective destination; B: collective source */
static unsigned char *src, *dst, *expect;
static uint64_t *words;      /* window words: [0] fetch_add, [1] cswap, [2] p/g */
static size_t words_off;     /* byte displacement of words in the window */
static int *counts, *displs;
static uint64_t salt = 0x1234, fadd = 0, cswapv = 0;

static void die(int c) { MPI_Abort(MPI_COMM_WORLD, c); }
static void barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }
static void gather(const double *mine, int reps, int max_over, double *out) {
  if (max_over) MPI_Reduce(mine, out, reps, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  else memcpy(out, mine, sizeof(double) * reps);
}
/* make the target's window memory current after the initiator's flush + barrier */
static void target_sync(void) { MPI_Win_sync(win); }

/* ---- RMA ---- */
static double put_common(size_t sz, long it, int window) {
  uint64_t s = ++salt;
  double t = 0;
  if (me == 0) {
    fill(src, sz, s);
    double t0 = now_s();
    if (window <= 1)
      for (long i = 0; i < it; i++) { MPI_Put(src, (int)sz, MPI_BYTE, 1, 0, (int)sz, MPI_BYTE, win); MPI_Win_flush(1, win); }
    else
      for (long k = 0; k < it / window; k++) {
        for (int j = 0; j < window; j++) MPI_Put(src, (int)sz, MPI_BYTE, 1, 0, (int)sz, MPI_BYTE, win);
        MPI_Win_flush(1, win);
      }
    t = (now_s() - t0) / it;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == 1) {
    target_sync();
    memcpy(dst, A, sz);
    fill(expect, sz, s);
    check_bytes("payload at the target", dst, expect, sz);
  }
  return t;
}
static double put_lat(size_t sz, long it, long w) { (void)w; return put_common(sz, it, 1); }
static double put_bw(size_t sz, long it, long w) { return put_common(sz, it, (int)w); }

static double get_common(size_t sz, long it, int window) {
  uint64_t s = ++salt;
  if (me == 1) { fill(A, sz, s); target_sync(); }
  MPI_Barrier(MPI_COMM_WORLD);
  fill(expect, sz, s);
  double t = 0;
  if (me == 0) {
    memset(dst, 0, sz * window);
    double t0 = now_s();
    if (window <= 1)
      for (long i = 0; i < it; i++) { MPI_Get(dst, (int)sz, MPI_BYTE, 1, 0, (int)sz, MPI_BYTE, win); MPI_Win_flush(1, win); }
    else
      for (long k = 0; k < it / window; k++) {
        for (int j = 0; j < window; j++) MPI_Get(dst + j * sz, (int)sz, MPI_BYTE, 1, 0, (int)sz, MPI_BYTE, win);
        MPI_Win_flush(1, win);
      }
    t = (now_s() - t0) / it;
    for (int j = 0; j < window; j++) check_bytes("fetched payload", dst + j * sz, expect, sz);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return t;
}
static double get_lat(size_t sz, long it, long w) { (void)w; return get_common(sz, it, 1); }
static double get_bw(size_t sz, long it, long w) { return get_common(sz, it, (int)w); }

static double fetch_add_lat(size_t sz, long it, long w) {
  (void)sz; (void)w;
  uint64_t base = fadd, one = 1;
  fadd += it;
  double t = 0;
  if (me == 0) {
    uint64_t got = base, want = base, old;
    double t0 = now_s();
    for (long i = 0; i < it; i++) {
      MPI_Fetch_and_op(&one, &old, MPI_UINT64_T, 1, words_off, MPI_SUM, win);
      MPI_Win_flush(1, win);
      if (old != base + i && got == want) { got = old; want = base + i; }
    }
    t = (now_s() - t0) / it;
    check_value("value returned by fetch_and_op", got, want);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == 1) { target_sync(); check_value("counter after the fetch_and_ops", words[0], fadd); }
  return t;
}
static double cswap_lat(size_t sz, long it, long w) {
  (void)sz; (void)w;
  uint64_t base = cswapv;
  cswapv += it;
  double t = 0;
  if (me == 0) {
    uint64_t got = base, want = base, old, cmp, nv;
    double t0 = now_s();
    for (long i = 0; i < it; i++) {
      cmp = base + i; nv = base + i + 1;
      MPI_Compare_and_swap(&nv, &cmp, &old, MPI_UINT64_T, 1, words_off + 8, win);
      MPI_Win_flush(1, win);
      if (old != base + i && got == want) { got = old; want = base + i; }
    }
    t = (now_s() - t0) / it;
    check_value("value returned by compare_and_swap", got, want);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == 1) { target_sync(); check_value("word after the compare_and_swaps", words[1], cswapv); }
  return t;
}

/* ---- barriers and collectives ---- */
static double timed_barrier(long it, MPI_Comm c) {
  double t0 = now_s();
  for (long i = 0; i < it; i++) MPI_Barrier(c);
  double t = (now_s() - t0) / it;
  for (int r = 0; r < 3; r++) { /* a barrier must order: each rank's value reaches all after it */
    uint64_t v = ++salt, all[np];
    MPI_Allgather(&v, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, c);
    MPI_Barrier(c);
    for (int p = 0; p < np; p++) check_value("rank's value around the barrier", all[p], v);
  }
  return t;
}
static double barrier_all(size_t sz, long it, long w) { (void)sz; (void)w; return timed_barrier(it, MPI_COMM_WORLD); }
static double team_barrier(size_t sz, long it, long w) { (void)sz; (void)w; return timed_barrier(it, team); }

#define TIMED(call)                     \
  double acc = 0;                       \
  for (long i = 0; i < it; i++) {       \
    double t0 = now_s();                \
    call;                               \
    acc += now_s() - t0;                \
    MPI_Barrier(MPI_COMM_WORLD);        \
  }

static double bcast(size_t sz, long it, long w) {
  (void)w;
  uint64_t s = ++salt;
  fill(expect, sz, s);
  if (me == 0) fill(A, sz, s); else memset(A, 0, sz);
  TIMED(MPI_Bcast(A, (int)sz, MPI_BYTE, 0, MPI_COMM_WORLD));
  check_bytes("broadcast payload", A, expect, sz);
  return acc / it;
}
static void a2a_fill(size_t sz, uint64_t s) {
  for (int p = 0; p < np; p++) fill(B + p * sz, sz, s + (uint64_t)me * 1000 + p);
  memset(A, 0, sz * np);
}
static void a2a_check(size_t sz, uint64_t s) {
  for (int p = 0; p < np; p++) {
    fill(expect, sz, s + (uint64_t)p * 1000 + me);
    check_bytes("block received from a rank", A + p * sz, expect, sz);
  }
}
static double alltoall(size_t sz, long it, long w) {
  (void)w;
  uint64_t s = ++salt;
  a2a_fill(sz, s);
  TIMED(MPI_Alltoall(B, (int)sz, MPI_BYTE, A, (int)sz, MPI_BYTE, MPI_COMM_WORLD));
  a2a_check(sz, s);
  return acc / it;
}
static double alltoallv(size_t sz, long it, long w) {
  (void)w;
  uint64_t s = ++salt;
  a2a_fill(sz, s);
  for (int p = 0; p < np; p++) { counts[p] = (int)sz; displs[p] = (int)(p * sz); }
  TIMED(MPI_Alltoallv(B, counts, displs, MPI_BYTE, A, counts, displs, MPI_BYTE, MPI_COMM_WORLD));
  a2a_check(sz, s);
  return acc / it;
}
static double fcollect(size_t sz, long it, long w) {
  (void)w;
  uint64_t s = ++salt;
  fill(B, sz, s + me);
  TIMED(MPI_Allgather(B, (int)sz, MPI_BYTE, A, (int)sz, MPI_BYTE, MPI_COMM_WORLD));
  for (int p = 0; p < np; p++) { fill(expect, sz, s + p); check_bytes("block collected from a rank", A + p * sz, expect, sz); }
  return acc / it;
}
static double reduce_sum(size_t sz, long it, long w) {
  (void)w;
  size_t ne = sz / 8;
  uint64_t s = ++salt;
  int64_t *in = (int64_t *)B, *out = (int64_t *)A;
  for (size_t j = 0; j < ne; j++) in[j] = (int64_t)((s + j) * (uint64_t)(me + 1));
  TIMED(MPI_Allreduce(in, out, (int)ne, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
  uint64_t tri = (uint64_t)np * (np + 1) / 2;
  for (size_t j = 0; j < ne; j++)
    if ((uint64_t)out[j] != (s + j) * tri || inject_fault) { check_value("reduced element", (uint64_t)out[j], (s + j) * tri); break; }
  return acc / it;
}

static const bench_t RMA[] = {
  {"put_lat", "rma", SWEEP, 0, 0, 2, 0, put_lat},
  {"get_lat", "rma", SWEEP, 0, 0, 2, 0, get_lat},
  {"put_bw", "rma", SWEEP, 1, 0, 2, 0, put_bw},
  {"get_bw", "rma", SWEEP, 1, 0, 2, 0, get_bw},
  {"fetch_add_lat", "sync", 8, 0, 0, 2, 0, fetch_add_lat},
  {"cswap_lat", "sync", 8, 0, 0, 2, 0, cswap_lat},
};
static const bench_t COLL[] = {
  {"barrier_all", "sync", 0, 0, 1, 1, 0, barrier_all},
  {"team_barrier", "coll", 0, 0, 1, 1, 0, team_barrier},
  {"bcast", "coll", SWEEP, 0, 1, 1, 0, bcast},
  {"alltoall", "coll", SWEEP, 0, 1, 1, 1, alltoall},
  {"alltoallv", "ops", SWEEP, 0, 1, 1, 1, alltoallv},
  {"fcollect", "coll", SWEEP, 0, 1, 1, 1, fcollect},
  {"reduce_sum", "coll", SWEEP, 0, 1, 1, 0, reduce_sum},
};

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  parse_opts(argc, argv, &O);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  MPI_Comm_dup(MPI_COMM_WORLD, &team);
  die_hook = die;
  inject_fault = O.fault;
  bind_cpu(O.bind, me, np);
  int shared = !O.extra || !strcmp(O.extra, "shared");
  size_t big = O.end * (np > 2 ? np : 2);
  size_t win_cap = O.end * O.window < WINDOW_CAP_BYTES ? O.end * O.window : WINDOW_CAP_BYTES;
  size_t local = big > win_cap ? big : win_cap;
  words_off = big;
  MPI_Aint wsize = (MPI_Aint)(big + 64);
  if (shared) {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Win_allocate_shared(wsize, 1, MPI_INFO_NULL, node, &A, &win);
  } else {
    MPI_Win_allocate(wsize, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &A, &win);
  }
  words = (uint64_t *)(A + big);
  memset(words, 0, 64);
  B = aligned_alloc(4096, (big + 4095) / 4096 * 4096);
  local = (local + 4095) / 4096 * 4096; /* page-aligned local buffers, like OSU and xpushmem-perf */
  src = aligned_alloc(4096, local);
  dst = aligned_alloc(4096, local);
  expect = aligned_alloc(4096, local);
  counts = malloc(sizeof(int) * np);
  displs = malloc(sizeof(int) * np);
  if (!B || !src || !dst || !expect || !counts || !displs) { fprintf(stderr, "mpi_bench: out of memory\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
  MPI_Win_lock_all(0, win);
  MPI_Barrier(MPI_COMM_WORLD);
  FILE *csv = me == 0 ? csv_open(O.csv) : NULL;
  runner_t r = {&O, shared ? "mpi-shared" : "mpi-alloc", me, np, barrier, gather, csv};
  run_benches(&r, RMA, sizeof RMA / sizeof RMA[0]);
  MPI_Win_unlock_all(win);
  runner_t c = {&O, "mpi", me, np, barrier, gather, csv};
  run_benches(&c, COLL, sizeof COLL / sizeof COLL[0]);
  if (me == 0 && csv != stdout) fclose(csv);
  MPI_Win_free(&win);
  MPI_Comm_free(&team);
  MPI_Finalize();
  return 0;
}

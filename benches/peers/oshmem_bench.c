/* Peer benchmark: Open MPI's OpenSHMEM (oshmem, OpenSHMEM 1.4 API) running the operations of xpushmem-perf with
 * the same sizes, iteration plan, validation and CSV output (impl "oshmem").
 *
 * Open MPI 4.1 implements OpenSHMEM 1.4, which has no shmem_put_signal / shmem_signal_wait_until: put_signal_pp
 * is EMULATED as shmem_putmem; shmem_fence; shmem_long_atomic_set(flag) and shmem_long_wait_until(flag, GE).
 * Collectives use the 1.4 active-set routines with pSync arrays (there are no teams in 1.4): team_barrier is
 * shmem_barrier over the active set of all PEs, reduce_sum is shmem_long_sum_to_all.
 *
 * Build: oshcc -O2 -o oshmem_bench oshmem_bench.c
 * Run:   oshrun -np 2 --mca osc ^rdma ./oshmem_bench [BENCH|GROUP ...] [options]   (see common.h)
 *        (--mca osc ^rdma: without it Open MPI 4.1.4 crashes in shmem_finalize, see baseline_peers.md)
 */
#include "common.h"
#include <shmem.h>

static opts_t O;
static int me, np;
static unsigned char *A, *B;   /* symmetric: RMA target / collective destination, collective source */
static unsigned char *src, *dst, *expect;
static long *words;            /* symmetric: [0] signal, [1] fetch_add, [2] cswap, [3] p/g, [8..8+np) barrier check */
static double *times;          /* symmetric: np * reps */
static long *psync, *psync2;   /* symmetric pSync arrays (two, alternated) */
static long *pwrk;             /* symmetric reduction work array */
static size_t pwrk_len;
static uint64_t salt = 0x1234, seqno = 0, fadd = 0, cswapv = 0;
static int psync_flip = 0;

static void die(int c) { shmem_global_exit(c); }
static void barrier(void) { shmem_barrier_all(); }
static void gather(const double *mine, int reps, int max_over, double *out) {
  shmem_putmem(times + (size_t)me * reps, mine, sizeof(double) * reps, 0);
  shmem_barrier_all();
  for (int k = 0; k < reps; k++) {
    out[k] = mine[k];
    if (me == 0 && max_over)
      for (int p = 0; p < np; p++) out[k] = times[p * reps + k] > out[k] ? times[p * reps + k] : out[k];
  }
  shmem_barrier_all();
}

static void check_own(const char *what, unsigned char *sym, size_t n, uint64_t s, int has_seq, uint64_t seq) {
  memcpy(dst, sym, n);
  fill(expect, n, s);
  if (has_seq) stamp(expect, n, seq);
  check_bytes(what, dst, expect, n);
}

/* ---- RMA ---- */
static double put_common(size_t sz, long it, int nbi) {
  uint64_t s = ++salt;
  double t = 0;
  if (me == 0) {
    fill(src, sz, s);
    double t0 = now_s();
    if (nbi) for (long i = 0; i < it; i++) { shmem_putmem_nbi(A, src, sz, 1); shmem_quiet(); }
    else for (long i = 0; i < it; i++) { shmem_putmem(A, src, sz, 1); shmem_quiet(); }
    t = (now_s() - t0) / it;
  }
  shmem_barrier_all();
  if (me == 1) check_own("payload at the target", A, sz, s, 0, 0);
  return t;
}
static double put_lat(size_t sz, long it, long w) { (void)w; return put_common(sz, it, 0); }
static double put_nbi_lat(size_t sz, long it, long w) { (void)w; return put_common(sz, it, 1); }

static void get_source(size_t sz) {
  uint64_t s = ++salt;
  if (me == 1) fill(A, sz, s);
  shmem_barrier_all();
  fill(expect, sz, s);
}
static double get_common(size_t sz, long it, int nbi) {
  get_source(sz);
  double t = 0;
  if (me == 0) {
    memset(dst, 0, sz);
    double t0 = now_s();
    if (nbi) for (long i = 0; i < it; i++) { shmem_getmem_nbi(dst, A, sz, 1); shmem_quiet(); }
    else for (long i = 0; i < it; i++) shmem_getmem(dst, A, sz, 1);
    t = (now_s() - t0) / it;
    check_bytes("fetched payload", dst, expect, sz);
  }
  shmem_barrier_all();
  return t;
}
static double get_lat(size_t sz, long it, long w) { (void)w; return get_common(sz, it, 0); }
static double get_nbi_lat(size_t sz, long it, long w) { (void)w; return get_common(sz, it, 1); }

static double put_bw(size_t sz, long it, long w) {
  uint64_t s = ++salt;
  double t = 0;
  if (me == 0) {
    fill(src, sz, s);
    double t0 = now_s();
    for (long k = 0; k < it / w; k++) {
      for (long j = 0; j < w; j++) shmem_putmem_nbi(A, src, sz, 1);
      shmem_quiet();
    }
    t = (now_s() - t0) / it;
  }
  shmem_barrier_all();
  if (me == 1) check_own("payload at the target", A, sz, s, 0, 0);
  return t;
}
static double get_bw(size_t sz, long it, long w) {
  get_source(sz);
  double t = 0;
  if (me == 0) {
    memset(dst, 0, sz * w);
    double t0 = now_s();
    for (long k = 0; k < it / w; k++) {
      for (long j = 0; j < w; j++) shmem_getmem_nbi(dst + j * sz, A, sz, 1);
      shmem_quiet();
    }
    t = (now_s() - t0) / it;
    for (long j = 0; j < w; j++) check_bytes("fetched payload of the window", dst + j * sz, expect, sz);
  }
  shmem_barrier_all();
  return t;
}
static double p_lat(size_t sz, long it, long w) {
  (void)sz; (void)w;
  uint64_t s = ++salt << 32;
  double t = 0;
  if (me == 0) {
    double t0 = now_s();
    for (long i = 0; i < it; i++) { shmem_long_p(&words[3], (long)(s + i), 1); shmem_quiet(); }
    t = (now_s() - t0) / it;
  }
  shmem_barrier_all();
  if (me == 1) check_value("last value stored by p", (uint64_t)words[3], s + it - 1);
  return t;
}
static double g_lat(size_t sz, long it, long w) {
  (void)sz; (void)w;
  uint64_t v = ++salt * 0x100000001ull;
  if (me == 1) words[3] = (long)v;
  shmem_barrier_all();
  double t = 0;
  if (me == 0) {
    uint64_t bad = v;
    double t0 = now_s();
    for (long i = 0; i < it; i++) { uint64_t g = (uint64_t)shmem_long_g(&words[3], 1); if (g != v) bad = g; }
    t = (now_s() - t0) / it;
    check_value("value loaded by g", bad, v);
  }
  shmem_barrier_all();
  return t;
}

/* ---- signals, atomics, barriers ---- */
static double put_signal_pp(size_t sz, long it, long w) {
  (void)w;
  uint64_t s = ++salt, base = seqno;
  seqno += it;
  double t = 0;
  if (me < 2) {
    int peer = 1 - me;
    fill(src, sz, s);
    unsigned char probe[16];
    size_t k = sz < 8 ? sz : 8;
    double t0 = now_s();
    for (long i = 1; i <= it; i++) {
      uint64_t q = base + i;
      if (me == 1) {
        shmem_long_wait_until(&words[0], SHMEM_CMP_GE, (long)q);
        memcpy(probe, A, k);
        if (sz >= 16) { memcpy(probe + 8, A + sz - 8, 8); check_stamp("received message", probe, 16, q); }
        else check_stamp("received message", probe, k, q);
      }
      stamp(src, sz, q);
      shmem_putmem(A, src, sz, peer);
      shmem_fence();
      shmem_long_atomic_set(&words[0], (long)q, peer);
      if (me == 0) {
        shmem_long_wait_until(&words[0], SHMEM_CMP_GE, (long)q);
        memcpy(probe, A, k);
        if (sz >= 16) { memcpy(probe + 8, A + sz - 8, 8); check_stamp("received message", probe, 16, q); }
        else check_stamp("received message", probe, k, q);
      }
    }
    t = (now_s() - t0) / it / 2;
  }
  shmem_barrier_all();
  if (me < 2) check_own("last message, whole payload", A, sz, s, 1, base + it);
  return t;
}
static double fetch_add_lat(size_t sz, long it, long w) {
  (void)sz; (void)w;
  uint64_t base = fadd;
  fadd += it;
  double t = 0;
  if (me == 0) {
    uint64_t got = base, want = base;
    double t0 = now_s();
    for (long i = 0; i < it; i++) {
      uint64_t old = (uint64_t)shmem_long_atomic_fetch_add(&words[1], 1, 1);
      if (old != base + i && got == want) { got = old; want = base + i; }
    }
    t = (now_s() - t0) / it;
    check_value("value returned by fetch_add", got, want);
  }
  shmem_barrier_all();
  if (me == 1) check_value("counter after the fetch_adds", (uint64_t)words[1], fadd);
  return t;
}
static double cswap_lat(size_t sz, long it, long w) {
  (void)sz; (void)w;
  uint64_t base = cswapv;
  cswapv += it;
  double t = 0;
  if (me == 0) {
    uint64_t got = base, want = base;
    double t0 = now_s();
    for (long i = 0; i < it; i++) {
      uint64_t old = (uint64_t)shmem_long_atomic_compare_swap(&words[2], (long)(base + i), (long)(base + i + 1), 1);
      if (old != base + i && got == want) { got = old; want = base + i; }
    }
    t = (now_s() - t0) / it;
    check_value("value returned by compare_swap", got, want);
  }
  shmem_barrier_all();
  if (me == 1) check_value("word after the compare_swaps", (uint64_t)words[2], cswapv);
  return t;
}

static long *next_psync(void) { psync_flip ^= 1; return psync_flip ? psync : psync2; }
static void team_barrier_call(void) { shmem_barrier(0, 0, np, next_psync()); }

static double timed_barrier(long it, void (*bar)(void)) {
  double t0 = now_s();
  for (long i = 0; i < it; i++) bar();
  double t = (now_s() - t0) / it;
  for (int r = 0; r < 3; r++) {
    uint64_t v = ++salt;
    for (int p = 0; p < np; p++) shmem_long_p(&words[8 + me], (long)v, p);
    shmem_quiet();
    bar();
    for (int p = 0; p < np; p++) check_value("PE's value after the barrier", (uint64_t)words[8 + p], v);
    bar();
  }
  return t;
}
static double barrier_all(size_t sz, long it, long w) { (void)sz; (void)w; return timed_barrier(it, shmem_barrier_all); }
static double sync_all(size_t sz, long it, long w) { (void)sz; (void)w; return timed_barrier(it, shmem_sync_all); }
static double team_barrier(size_t sz, long it, long w) { (void)sz; (void)w; return timed_barrier(it, team_barrier_call); }

/* ---- collectives: OSU style, each call timed alone, barrier between calls ---- */
static double bcast(size_t sz, long it, long w) {
  (void)w;
  uint64_t s = ++salt;
  fill(B, sz, s); /* every PE fills; only the root's matters */
  memset(A, 0, sz);
  fill(expect, sz, s);
  shmem_barrier_all();
  double acc = 0;
  for (long i = 0; i < it; i++) {
    double t0 = now_s();
    shmem_broadcast64(A, B, sz / 8, 0, 0, 0, np, next_psync());
    acc += now_s() - t0;
    shmem_barrier_all();
  }
  /* OpenSHMEM 1.4: the root's destination is not written */
  if (me != 0) check_own("broadcast payload", A, sz / 8 * 8, s, 0, 0);
  return acc / it;
}
static double alltoall(size_t sz, long it, long w) {
  (void)w;
  uint64_t s = ++salt;
  for (int p = 0; p < np; p++) fill(B + p * sz, sz, s + (uint64_t)me * 1000 + p);
  shmem_barrier_all();
  double acc = 0;
  for (long i = 0; i < it; i++) {
    double t0 = now_s();
    shmem_alltoall64(A, B, sz / 8, 0, 0, np, next_psync());
    acc += now_s() - t0;
    shmem_barrier_all();
  }
  for (int p = 0; p < np; p++) {
    fill(expect, sz, s + (uint64_t)p * 1000 + me);
    memcpy(dst, A + p * sz, sz);
    check_bytes("block received from a PE", dst, expect, sz / 8 * 8);
  }
  return acc / it;
}
static double fcollect(size_t sz, long it, long w) {
  (void)w;
  uint64_t s = ++salt;
  fill(B, sz, s + me);
  shmem_barrier_all();
  double acc = 0;
  for (long i = 0; i < it; i++) {
    double t0 = now_s();
    shmem_fcollect64(A, B, sz / 8, 0, 0, np, next_psync());
    acc += now_s() - t0;
    shmem_barrier_all();
  }
  for (int p = 0; p < np; p++) {
    fill(expect, sz, s + p);
    memcpy(dst, A + p * sz, sz);
    check_bytes("block collected from a PE", dst, expect, sz / 8 * 8);
  }
  return acc / it;
}
static double reduce_sum(size_t sz, long it, long w) {
  (void)w;
  size_t ne = sz / 8;
  uint64_t s = ++salt;
  long *in = (long *)B, *out = (long *)A;
  for (size_t j = 0; j < ne; j++) in[j] = (long)((s + j) * (uint64_t)(me + 1));
  shmem_barrier_all();
  double acc = 0;
  for (long i = 0; i < it; i++) {
    double t0 = now_s();
    shmem_long_sum_to_all(out, in, (int)ne, 0, 0, np, pwrk, next_psync());
    acc += now_s() - t0;
    shmem_barrier_all();
  }
  uint64_t tri = (uint64_t)np * (np + 1) / 2;
  for (size_t j = 0; j < ne; j++)
    if ((uint64_t)out[j] != (s + j) * tri || inject_fault) { check_value("reduced element", (uint64_t)out[j], (s + j) * tri); break; }
  return acc / it;
}

static const bench_t LIST[] = {
  {"put_lat", "rma", SWEEP, 0, 0, 2, 0, put_lat},
  {"put_nbi_lat", "rma", SWEEP, 0, 0, 2, 0, put_nbi_lat},
  {"get_lat", "rma", SWEEP, 0, 0, 2, 0, get_lat},
  {"get_nbi_lat", "rma", SWEEP, 0, 0, 2, 0, get_nbi_lat},
  {"put_bw", "rma", SWEEP, 1, 0, 2, 0, put_bw},
  {"get_bw", "rma", SWEEP, 1, 0, 2, 0, get_bw},
  {"p_lat", "rma", 8, 0, 0, 2, 0, p_lat},
  {"g_lat", "rma", 8, 0, 0, 2, 0, g_lat},
  {"put_signal_pp", "sync", SWEEP, 0, 0, 2, 0, put_signal_pp},
  {"fetch_add_lat", "sync", 8, 0, 0, 2, 0, fetch_add_lat},
  {"cswap_lat", "sync", 8, 0, 0, 2, 0, cswap_lat},
  {"barrier_all", "sync", 0, 0, 1, 1, 0, barrier_all},
  {"sync_all", "sync", 0, 0, 1, 1, 0, sync_all},
  {"team_barrier", "coll", 0, 0, 1, 1, 0, team_barrier},
  {"bcast", "coll", SWEEP, 0, 1, 1, 0, bcast},
  {"alltoall", "coll", SWEEP, 0, 1, 1, 1, alltoall},
  {"fcollect", "coll", SWEEP, 0, 1, 1, 1, fcollect},
  {"reduce_sum", "coll", SWEEP, 0, 1, 1, 0, reduce_sum},
};

int main(int argc, char **argv) {
  parse_opts(argc, argv, &O);
  shmem_init();
  me = shmem_my_pe();
  np = shmem_n_pes();
  die_hook = die;
  inject_fault = O.fault;
  bind_cpu(O.bind, me, np);
  size_t big = O.end * (np > 2 ? np : 2);
  size_t win = O.end * O.window < WINDOW_CAP_BYTES ? O.end * O.window : WINDOW_CAP_BYTES;
  size_t local = big > win ? big : win;
  A = shmem_align(4096, big);
  B = shmem_align(4096, big);
  words = shmem_calloc(8 + np, sizeof(long));
  times = shmem_calloc(np * O.reps, sizeof(double));
  size_t ps = SHMEM_BCAST_SYNC_SIZE;
  if (SHMEM_ALLTOALL_SYNC_SIZE > ps) ps = SHMEM_ALLTOALL_SYNC_SIZE;
  if (SHMEM_COLLECT_SYNC_SIZE > ps) ps = SHMEM_COLLECT_SYNC_SIZE;
  if (SHMEM_REDUCE_SYNC_SIZE > ps) ps = SHMEM_REDUCE_SYNC_SIZE;
  if (SHMEM_BARRIER_SYNC_SIZE > ps) ps = SHMEM_BARRIER_SYNC_SIZE;
  psync = shmem_malloc(ps * sizeof(long));
  psync2 = shmem_malloc(ps * sizeof(long));
  for (size_t i = 0; i < ps; i++) psync[i] = psync2[i] = SHMEM_SYNC_VALUE;
  pwrk_len = O.end / 8 / 2 + 1;
  if (pwrk_len < SHMEM_REDUCE_MIN_WRKDATA_SIZE) pwrk_len = SHMEM_REDUCE_MIN_WRKDATA_SIZE;
  pwrk = shmem_malloc(pwrk_len * sizeof(long));
  local = (local + 4095) / 4096 * 4096; /* page-aligned local buffers, like OSU and xpushmem-perf */
  src = aligned_alloc(4096, local);
  dst = aligned_alloc(4096, local);
  expect = aligned_alloc(4096, local);
  if (!A || !B || !words || !times || !psync || !psync2 || !pwrk || !src || !dst || !expect) {
    fprintf(stderr, "oshmem_bench: out of memory (symmetric %zu x 2; Open MPI's heap size is SHMEM_SYMMETRIC_HEAP_SIZE)\n", big);
    shmem_global_exit(1);
  }
  shmem_barrier_all();
  runner_t r = {&O, "oshmem", me, np, barrier, gather, me == 0 ? csv_open(O.csv) : NULL};
  run_benches(&r, LIST, sizeof LIST / sizeof LIST[0]);
  if (me == 0 && r.csv != stdout) fclose(r.csv);
  shmem_barrier_all();
  shmem_finalize();
  return 0;
}

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
 * ep_step (impl "mpi", run only when named, like xpushmem-perf's ep group): issue 29's MoE step as the
 * all_to_all_single reference of benches/ep_bench.py (_reference_step / _mpi_step): per-destination-rank row counts
 * by MPI_Alltoall, rows of token bytes + f32 weights + int64 expert ids by MPI_Alltoallv, the token rows back by
 * MPI_Alltoallv, an f32 index-add in token order; the cases, routing (splitmix64) and token values of
 * benches/src/ep.rs, so both sides move the same tokens; the first step of each case checked.
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

/* ---- issue 29's MoE step (benches/src/ep.rs: the same cases, generator, routing and token values) ---- */
#define EP_TOPK 8
#define EP_LOCAL 8 /* experts per rank */
#define EP_NCASES 6
static const size_t EP_CASES[EP_NCASES][2] = {{128, 1024}, {128, 7168}, {512, 1024}, {512, 7168}, {4096, 1024}, {4096, 7168}};
#define EP_SEED 0xE9B0000000000029ull
#define EP_META (EP_TOPK * 4 + EP_TOPK * 8) /* a row's f32 weights and int64 expert ids */

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/* ep.rs routing(): per token a partial Fisher-Yates shuffle of the experts (k draws), then k weights */
static void ep_routing(int rank, size_t n, size_t h, int experts, int64_t *idx, float *w, uint64_t *perm) {
  uint64_t s = EP_SEED ^ ((uint64_t)rank << 40) ^ ((uint64_t)n << 16) ^ (uint64_t)h;
  for (size_t t = 0; t < n; t++) {
    for (int e = 0; e < experts; e++) perm[e] = (uint64_t)e;
    for (int j = 0; j < EP_TOPK; j++) {
      size_t i = (size_t)j + (size_t)(splitmix64(&s) % (uint64_t)(experts - j));
      uint64_t tmp = perm[j]; perm[j] = perm[i]; perm[i] = tmp;
      idx[t * EP_TOPK + j] = (int64_t)perm[j];
    }
    for (int j = 0; j < EP_TOPK; j++) w[t * EP_TOPK + j] = (float)(splitmix64(&s) >> 40) / 16777216.0f;
  }
}
static int ep_value(int rank, size_t t, size_t c) { return (int)((t * 7 + c * 13 + (size_t)rank * 5) % 17) - 8; }
static uint16_t bf16_int(int v) { float f = (float)v; uint32_t u; memcpy(&u, &f, 4); return (uint16_t)(u >> 16); }
static float bf16_f32(uint16_t b) { uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return f; }
static uint16_t f32_bf16(float f) { uint32_t u; memcpy(&u, &f, 4); u += 0x7fff + ((u >> 16) & 1); return (uint16_t)(u >> 16); }

/* buffers, allocated once for the largest selected case */
static struct {
  size_t n, h;                      /* the case the inputs hold */
  uint16_t *x, *out;                /* tokens, combine output (bf16) */
  int64_t *idx;                     /* topk_idx */
  float *w, *acc;                   /* topk_weights, f32 sums */
  unsigned char *hit;               /* [n, W]: token t goes to rank d */
  int32_t *tok;                     /* the rows' tokens, by destination then token */
  unsigned char *packed, *recv, *rows, *back;
  int64_t *sendc, *recvc;           /* rows per rank */
  int *sc, *sd, *rc, *rd;           /* MPI_Alltoallv counts and displacements, bytes */
  uint64_t *perm;
  int checked[EP_NCASES];
} EP;

static int ep_selected(void) {
  for (int i = 0; i < O.nselect; i++)
    if (!strcmp(O.select[i], "ep_step") || !strcmp(O.select[i], "ep")) return 1;
  return 0;
}
static int ep_in_range(int c) {
  size_t sz = EP_CASES[c][0] * EP_CASES[c][1] * 2;
  return sz >= O.begin && sz <= O.end;
}
static void *ep_alloc(size_t bytes) {
  void *p = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096 + 4096);
  if (!p) { fprintf(stderr, "mpi_bench: ep_step: out of memory (%zu bytes)\n", bytes); MPI_Abort(MPI_COMM_WORLD, 1); }
  return p;
}
static void ep_setup(void) {
  int experts = EP_LOCAL * np;
  size_t max_n = 1, max_h = 1, max_recv = 1;
  EP.perm = ep_alloc(sizeof(uint64_t) * experts);
  for (int c = 0; c < EP_NCASES; c++) {
    if (!ep_in_range(c)) continue;
    size_t n = EP_CASES[c][0], h = EP_CASES[c][1];
    max_n = n > max_n ? n : max_n;
    max_h = h > max_h ? h : max_h;
    /* the most rows any rank receives: from every rank's routing */
    int64_t *idx = ep_alloc(sizeof(int64_t) * n * EP_TOPK);
    float *w = ep_alloc(sizeof(float) * n * EP_TOPK);
    size_t got[np];
    memset(got, 0, sizeof got);
    for (int s = 0; s < np; s++) {
      ep_routing(s, n, h, experts, idx, w, EP.perm);
      for (size_t t = 0; t < n; t++) {
        unsigned char seen[np];
        memset(seen, 0, sizeof seen);
        for (int j = 0; j < EP_TOPK; j++) seen[idx[t * EP_TOPK + j] / EP_LOCAL] = 1;
        for (int d = 0; d < np; d++) got[d] += seen[d];
      }
    }
    for (int d = 0; d < np; d++) max_recv = got[d] > max_recv ? got[d] : max_recv;
    free(idx);
    free(w);
  }
  size_t hb = max_h * 2, sent = max_n * (size_t)(np < EP_TOPK ? np : EP_TOPK);
  if ((hb + EP_META) * (sent > max_recv ? sent : max_recv) > (size_t)INT32_MAX) {
    fprintf(stderr, "mpi_bench: ep_step: the exchange exceeds MPI's int counts\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  EP.x = ep_alloc(max_n * hb);
  EP.out = ep_alloc(max_n * hb);
  EP.idx = ep_alloc(sizeof(int64_t) * max_n * EP_TOPK);
  EP.w = ep_alloc(sizeof(float) * max_n * EP_TOPK);
  EP.acc = ep_alloc(sizeof(float) * max_n * max_h);
  EP.hit = ep_alloc(max_n * (size_t)np);
  EP.tok = ep_alloc(sizeof(int32_t) * sent);
  EP.packed = ep_alloc(sent * (hb + EP_META));
  EP.recv = ep_alloc(max_recv * (hb + EP_META));
  EP.rows = ep_alloc(max_recv * hb);
  EP.back = ep_alloc(sent * hb);
  EP.sendc = ep_alloc(sizeof(int64_t) * np);
  EP.recvc = ep_alloc(sizeof(int64_t) * np);
  EP.sc = ep_alloc(sizeof(int) * np);
  EP.sd = ep_alloc(sizeof(int) * np);
  EP.rc = ep_alloc(sizeof(int) * np);
  EP.rd = ep_alloc(sizeof(int) * np);
  EP.n = 0;
}
static void ep_inputs(size_t n, size_t h) {
  if (EP.n == n && EP.h == h) return;
  ep_routing(me, n, h, EP_LOCAL * np, EP.idx, EP.w, EP.perm);
  for (size_t t = 0; t < n; t++)
    for (size_t c = 0; c < h; c++) EP.x[t * h + c] = bf16_int(ep_value(me, t, c));
  EP.n = n;
  EP.h = h;
}
static void ep_layout(const int64_t *rows, size_t b, int *cnt, int *dsp) {
  size_t at = 0;
  for (int p = 0; p < np; p++) { cnt[p] = (int)(rows[p] * b); dsp[p] = (int)at; at += rows[p] * b; }
}
/* one step: _mpi_step of benches/ep_bench.py (the experts are the identity) */
static void ep_step_once(size_t n, size_t h) {
  size_t hb = h * 2, rb = hb + EP_META;
  /* the send plan: one row per (destination rank, token), by destination then token */
  memset(EP.hit, 0, n * (size_t)np);
  for (size_t t = 0; t < n; t++)
    for (int j = 0; j < EP_TOPK; j++)
      if (EP.idx[t * EP_TOPK + j] >= 0) EP.hit[t * np + EP.idx[t * EP_TOPK + j] / EP_LOCAL] = 1;
  size_t r = 0;
  for (int d = 0; d < np; d++) {
    size_t first = r;
    for (size_t t = 0; t < n; t++)
      if (EP.hit[t * np + d]) EP.tok[r++] = (int32_t)t;
    EP.sendc[d] = (int64_t)(r - first);
  }
  size_t sent = r;
  MPI_Alltoall(EP.sendc, 1, MPI_INT64_T, EP.recvc, 1, MPI_INT64_T, MPI_COMM_WORLD);
  size_t recvd = 0;
  for (int p = 0; p < np; p++) recvd += (size_t)EP.recvc[p];
  for (size_t i = 0; i < sent; i++) {
    size_t t = (size_t)EP.tok[i];
    unsigned char *row = EP.packed + i * rb;
    memcpy(row, EP.x + t * h, hb);
    memcpy(row + hb, EP.w + t * EP_TOPK, EP_TOPK * 4);
    memcpy(row + hb + EP_TOPK * 4, EP.idx + t * EP_TOPK, EP_TOPK * 8);
  }
  ep_layout(EP.sendc, rb, EP.sc, EP.sd);
  ep_layout(EP.recvc, rb, EP.rc, EP.rd);
  MPI_Alltoallv(EP.packed, EP.sc, EP.sd, MPI_BYTE, EP.recv, EP.rc, EP.rd, MPI_BYTE, MPI_COMM_WORLD);
  for (size_t i = 0; i < recvd; i++) memcpy(EP.rows + i * hb, EP.recv + i * rb, hb); /* the experts' outputs */
  ep_layout(EP.recvc, hb, EP.rc, EP.rd);
  ep_layout(EP.sendc, hb, EP.sc, EP.sd);
  MPI_Alltoallv(EP.rows, EP.rc, EP.rd, MPI_BYTE, EP.back, EP.sc, EP.sd, MPI_BYTE, MPI_COMM_WORLD);
  memset(EP.acc, 0, sizeof(float) * n * h);
  for (size_t i = 0; i < sent; i++) {
    float *a = EP.acc + (size_t)EP.tok[i] * h;
    const uint16_t *b = (const uint16_t *)(EP.back + i * hb);
    for (size_t c = 0; c < h; c++) a[c] += bf16_f32(b[c]);
  }
  for (size_t e = 0; e < n * h; e++) EP.out[e] = f32_bf16(EP.acc[e]);
}
/* the reference: token t's combined row is x[t] times its number of destination ranks */
static void ep_check(size_t n, size_t h) {
  uint16_t *want = ep_alloc(n * h * 2);
  for (size_t t = 0; t < n; t++) {
    int ranks = 0;
    for (int j = 0; j < EP_TOPK; j++) {
      int64_t d = EP.idx[t * EP_TOPK + j] / EP_LOCAL, dup = 0;
      for (int i = 0; i < j; i++) dup |= EP.idx[t * EP_TOPK + i] / EP_LOCAL == d;
      ranks += !dup;
    }
    for (size_t c = 0; c < h; c++) want[t * h + c] = bf16_int(ep_value(me, t, c) * ranks);
  }
  check_bytes("combined tokens", (unsigned char *)EP.out, (const unsigned char *)want, n * h * 2);
  free(want);
}
/* `iters` steps, each timed alone between barriers: this rank's median */
static double ep_timed(int c, long it) {
  size_t n = EP_CASES[c][0], h = EP_CASES[c][1];
  double times[it];
  ep_inputs(n, h);
  for (long i = 0; i < it; i++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    ep_step_once(n, h);
    times[i] = now_s() - t0;
    if (!EP.checked[c]) { ep_check(n, h); EP.checked[c] = 1; }
  }
  return median_of(times, (int)it);
}
/* bench::run for the cases within -b..-e (size = one rank's token bytes), iterations capped by --coll-iters */
static void run_ep(FILE *csv) {
  ep_setup();
  for (int c = 0; c < EP_NCASES; c++) {
    if (!ep_in_range(c)) continue;
    size_t size = EP_CASES[c][0] * EP_CASES[c][1] * 2;
    plan_t p = make_plan_c(size, size, &O, 0, 1);
    cur_bench = "ep_step";
    cur_size = size;
    barrier();
    if (p.warmup > 0) ep_timed(c, p.warmup);
    double mine[O.reps], out[O.reps];
    for (int k = 0; k < O.reps; k++) {
      barrier();
      mine[k] = ep_timed(c, p.iters);
    }
    gather(mine, (int)O.reps, 1, out);
    if (me == 0) csv_row(csv, "mpi", "ep_step", np, size, p.iters, (int)O.reps, out, size);
  }
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
  /* a run of ep_step alone keeps its own buffers: no sweep-sized ones */
  int only_ep = ep_selected();
  for (int i = 0; i < O.nselect; i++) only_ep &= !strcmp(O.select[i], "ep_step") || !strcmp(O.select[i], "ep");
  size_t end = only_ep ? 8 : O.end;
  size_t big = end * (np > 2 ? np : 2);
  size_t win_cap = end * O.window < WINDOW_CAP_BYTES ? end * O.window : WINDOW_CAP_BYTES;
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
  if (ep_selected()) run_ep(csv);
  if (me == 0 && csv != stdout) fclose(csv);
  MPI_Win_free(&win);
  MPI_Comm_free(&team);
  MPI_Finalize();
  return 0;
}

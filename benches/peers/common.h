/* Shared by the C peer benchmarks of xpushmem-perf (Open MPI OpenSHMEM, MPI, raw shared memory, memcpy).
 *
 * Mirrors benches/src/{opts,stats,ctx,bench}.rs exactly: the same options (-b -e -f -i -w -r -W --budget --csv
 * --bind), the same iteration plan, the same data pattern and stamps, the same repeat/median/min logic and the
 * same CSV row format, so every implementation runs the same number of the same operations:
 *
 *   impl,bench,npes,size,iters,reps,median_us,min_us,median_gbps,best_gbps
 */
#ifndef XPUSHMEM_PEERS_COMMON_H
#define XPUSHMEM_PEERS_COMMON_H
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WINDOW_CAP_BYTES ((size_t)64 << 20)
#define MAX_SELECT 64

typedef struct {
  size_t begin, end, budget;
  long factor, iters, coll_iters, warmup, reps, window;
  const char *csv;
  int bind; /* 0 none, 1 auto, 2 core */
  int fault;
  int nselect;
  const char *select[MAX_SELECT];
  const char *extra; /* program-specific --win etc. */
} opts_t;

static inline void usage_exit(const char *prog, const char *msg) {
  fprintf(stderr, "%s: %s\nusage: %s [BENCH|GROUP ...] [-b SIZE] [-e SIZE] [-f N] [-i N] [-w N] [-r N] [-W N] "
                  "[--coll-iters N] [--budget SIZE] [--csv FILE] [--bind auto|core|none] [--win shared|alloc]\n",
          prog, msg, prog);
  exit(2);
}

static inline size_t parse_size(const char *s, int *ok) {
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  *ok = end != s;
  switch (*end) {
  case 'k': case 'K': v <<= 10; end++; break;
  case 'm': case 'M': v <<= 20; end++; break;
  case 'g': case 'G': v <<= 30; end++; break;
  default: break;
  }
  if (*end) *ok = 0;
  return (size_t)v;
}

static inline void parse_opts(int argc, char **argv, opts_t *o) {
  *o = (opts_t){.begin = 8, .end = 64 << 20, .budget = 128 << 20, .factor = 2, .iters = 10000, .coll_iters = 1000, .warmup = 100,
                .reps = 5, .window = 64, .csv = NULL, .bind = 1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int ok = 1;
    if (!strcmp(a, "--inject-fault")) { o->fault = 1; continue; }
    if (a[0] != '-') {
      if (o->nselect < MAX_SELECT) o->select[o->nselect++] = a;
      continue;
    }
    if (i + 1 >= argc) usage_exit(argv[0], "option needs a value");
    const char *v = argv[++i];
    if (!strcmp(a, "-b")) o->begin = parse_size(v, &ok);
    else if (!strcmp(a, "-e")) o->end = parse_size(v, &ok);
    else if (!strcmp(a, "--budget")) o->budget = parse_size(v, &ok);
    else if (!strcmp(a, "-f")) o->factor = atol(v);
    else if (!strcmp(a, "-i")) o->iters = atol(v);
    else if (!strcmp(a, "--coll-iters")) o->coll_iters = atol(v);
    else if (!strcmp(a, "-w")) o->warmup = atol(v);
    else if (!strcmp(a, "-r")) o->reps = atol(v);
    else if (!strcmp(a, "-W")) o->window = atol(v);
    else if (!strcmp(a, "--csv")) o->csv = v;
    else if (!strcmp(a, "--win")) o->extra = v;
    else if (!strcmp(a, "--bind")) o->bind = !strcmp(v, "none") ? 0 : !strcmp(v, "core") ? 2 : 1;
    else usage_exit(argv[0], "unknown option");
    if (!ok) usage_exit(argv[0], "bad size");
  }
  if (o->begin == 0 || o->begin > o->end) usage_exit(argv[0], "need 0 < begin <= end");
  if (o->factor < 2) o->factor = 2;
  if (o->iters < 1) o->iters = 1;
  if (o->coll_iters < 1) o->coll_iters = 1;
  if (o->reps < 1) o->reps = 1;
  if (o->window < 1) o->window = 1;
  if (o->warmup < 0) o->warmup = 0;
}

static inline int selected(const opts_t *o, const char *name, const char *group) {
  if (o->nselect == 0) return 1;
  for (int i = 0; i < o->nselect; i++)
    if (!strcmp(o->select[i], "all") || !strcmp(o->select[i], name) || !strcmp(o->select[i], group)) return 1;
  return 0;
}

typedef struct { long iters, warmup, window; } plan_t;

/* stats::plan; bench::plan_of caps collectives and ops (coll != 0) at --coll-iters */
static inline plan_t make_plan_c(size_t bytes_per_op, size_t size, const opts_t *o, int windowed, int coll) {
  plan_t p;
  size_t by_budget = o->budget / (bytes_per_op ? bytes_per_op : 1);
  long max_it = coll && o->coll_iters < o->iters ? o->coll_iters : o->iters;
  long it = (long)(by_budget < (size_t)max_it ? by_budget : (size_t)max_it);
  if (it < 2) it = 2;
  long w = 1;
  if (windowed) {
    size_t c = WINDOW_CAP_BYTES / (size ? size : 1);
    w = c < 1 ? 1 : (long)(c > (size_t)o->window ? (size_t)o->window : c);
  }
  p.iters = (it + w - 1) / w * w;
  p.window = w;
  p.warmup = o->warmup < p.iters ? o->warmup : p.iters;
  return p;
}
static inline plan_t make_plan(size_t bytes_per_op, size_t size, const opts_t *o, int windowed) {
  return make_plan_c(bytes_per_op, size, o, windowed, 0);
}

static inline double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static inline int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static inline double median_of(const double *v, int n) {
  double s[n];
  memcpy(s, v, sizeof s);
  qsort(s, n, sizeof(double), cmp_d);
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}
static inline double min_of(const double *v, int n) {
  double m = v[0];
  for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
  return m;
}

/* ctx::pattern_word / fill / stamp / stamped */
static inline uint64_t pattern_word(size_t i, uint64_t salt) {
  return (uint64_t)i * 0x9E3779B97F4A7C15ull ^ ((salt << 29) | (salt >> 35)) ^ 0x5A5A5A5Aull;
}
static inline void fill(unsigned char *buf, size_t n, uint64_t salt) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) { uint64_t w = pattern_word(i / 8, salt); memcpy(buf + i, &w, 8); }
  if (i < n) { uint64_t w = pattern_word(i / 8, salt); memcpy(buf + i, &w, n - i); }
}
static inline void stamp(unsigned char *buf, size_t n, uint64_t seq) {
  memcpy(buf, &seq, n < 8 ? n : 8);
  if (n >= 16) memcpy(buf + n - 8, &seq, 8);
}
static inline int stamped(const unsigned char *buf, size_t n, uint64_t seq) {
  if (memcmp(buf, &seq, n < 8 ? n : 8)) return 0;
  return n < 16 || !memcmp(buf + n - 8, &seq, 8);
}

/* validation: program sets die_hook (MPI_Abort / shmem_global_exit) */
static void (*die_hook)(int) = NULL;
static const char *cur_bench = "";
static size_t cur_size = 0;
static int inject_fault = 0;
static inline void fail(const char *what) {
  fprintf(stderr, "VALIDATION FAILED in %s at %zu bytes: %s\n", cur_bench, cur_size, what);
  fflush(stderr);
  if (die_hook) die_hook(1);
  exit(1);
}
static inline void check_bytes(const char *what, unsigned char *got, const unsigned char *want, size_t n) {
  if (inject_fault && n) got[n / 2] ^= 0x40;
  if (memcmp(got, want, n)) {
    size_t i = 0;
    while (got[i] == want[i]) i++;
    char m[256];
    snprintf(m, sizeof m, "%s: byte %zu is 0x%02x, expected 0x%02x", what, i, got[i], want[i]);
    fail(m);
  }
}
static inline void check_value(const char *what, uint64_t got, uint64_t want) {
  if (inject_fault) got ^= 1;
  if (got != want) {
    char m[256];
    snprintf(m, sizeof m, "%s: got %llu, expected %llu", what, (unsigned long long)got, (unsigned long long)want);
    fail(m);
  }
}
static inline void check_stamp(const char *what, unsigned char *buf, size_t n, uint64_t seq) {
  if (inject_fault) buf[0] ^= 0x40;
  if (!stamped(buf, n, seq)) fail(what);
}

/* --bind: auto = one core per process when processes <= allowed CPUs */
static inline int bind_cpu(int mode, int me, int n) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed)) return -1;
  int cpus[CPU_SETSIZE], k = 0;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &allowed)) cpus[k++] = c;
  if (mode == 0 || k == 0 || (mode == 1 && n > k)) return -1;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[me % k], &one);
  return sched_setaffinity(0, sizeof one, &one) ? -1 : cpus[me % k];
}

static FILE *csv_open(const char *path) {
  FILE *f = path ? fopen(path, "w") : stdout;
  if (!f) { perror(path); exit(1); }
  fprintf(f, "impl,bench,npes,size,iters,reps,median_us,min_us,median_gbps,best_gbps\n");
  fflush(f);
  return f;
}

/* one CSV row from per-repeat seconds per operation */
static inline void csv_row(FILE *f, const char *impl, const char *bench, int npes, size_t size, long iters, int reps,
                    const double *secs, size_t bytes) {
  double med = median_of(secs, reps), mn = min_of(secs, reps);
  fprintf(f, "%s,%s,%d,%zu,%ld,%d,%.4f,%.4f,%.4f,%.4f\n", impl, bench, npes, size, iters, reps, med * 1e6, mn * 1e6,
          bytes / med / 1e9, bytes / mn / 1e9);
  fflush(f);
}

/* bench::Bench and bench::run */
#define SWEEP ((size_t)-1)
typedef struct {
  const char *name, *group;
  size_t fixed;      /* SWEEP, or the one size it runs at */
  int windowed;      /* runs in windows of -W operations */
  int timing_max;    /* slowest PE per repeat (else PE 0's) */
  int min_pes;
  int bytes_times_n; /* bytes per operation = size * npes (else size) */
  double (*run)(size_t size, long iters, long window); /* seconds per operation on this PE */
} bench_t;

typedef struct {
  const opts_t *o;
  const char *impl;
  int me, n;
  void (*barrier)(void);
  /* per-repeat times: out[k] = PE 0's (max_over == 0) or the max over PEs, valid on PE 0 */
  void (*gather)(const double *mine, int reps, int max_over, double *out);
  FILE *csv;
} runner_t;

static inline void run_benches(const runner_t *r, const bench_t *list, int nb) {
  const opts_t *o = r->o;
  for (int bi = 0; bi < nb; bi++) {
    const bench_t *b = &list[bi];
    if (!selected(o, b->name, b->group) || r->n < b->min_pes) continue;
    for (size_t size = b->fixed == SWEEP ? o->begin : b->fixed;; size *= (size_t)o->factor) {
      size_t bytes = b->bytes_times_n ? size * (size_t)r->n : size;
      int coll = !strcmp(b->group, "coll") || !strcmp(b->group, "ops");
      plan_t p = make_plan_c(bytes, size, o, b->windowed, coll);
      cur_bench = b->name;
      cur_size = size;
      r->barrier();
      if (p.warmup > 0) b->run(size, (p.warmup + p.window - 1) / p.window * p.window, p.window);
      double mine[o->reps], out[o->reps];
      for (int k = 0; k < o->reps; k++) {
        r->barrier();
        mine[k] = b->run(size, p.iters, p.window);
      }
      r->gather(mine, (int)o->reps, b->timing_max, out);
      if (r->me == 0) csv_row(r->csv, r->impl, b->name, r->n, size, p.iters, (int)o->reps, out, bytes);
      if (b->fixed != SWEEP || size >= o->end || size * (size_t)o->factor > o->end) break;
    }
  }
}

#endif

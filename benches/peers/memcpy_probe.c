/* Physical reference: plain memcpy bandwidth and time in one process, hot buffers (the same source and
 * destination every time, like the one reused target of put_bw). impl "memcpy", bench "memcpy", npes 1.
 * Second reference, bench "memcpy_win": windows of memcpys from one source into distinct destination chunks, with
 * the windows of the bandwidth benchmarks (up to -W copies, at most 64 MiB per window), i.e. the memory traffic of
 * get_bw, whose gets fill distinct local chunks (above a few MiB per window that is DRAM traffic, not cache).
 * The iteration plan is the one of every other benchmark (common.h). Options as in common.h.
 *
 * Build: gcc -O2 -o memcpy_probe memcpy_probe.c
 */
#include "common.h"

int main(int argc, char **argv) {
  opts_t o;
  parse_opts(argc, argv, &o);
  inject_fault = o.fault;
  bind_cpu(o.bind, 0, 1);
  unsigned char *src = aligned_alloc(4096, (o.end + 4095) / 4096 * 4096);
  unsigned char *dst = aligned_alloc(4096, (o.end + 4095) / 4096 * 4096);
  size_t span = WINDOW_CAP_BYTES > o.end ? WINDOW_CAP_BYTES : o.end; /* the largest window */
  unsigned char *win = aligned_alloc(4096, (span + 4095) / 4096 * 4096);
  unsigned char *expect = malloc(o.end);
  FILE *csv = csv_open(o.csv);
  uint64_t salt = 0x1234;
  cur_bench = "memcpy";
  for (size_t sz = o.begin; sz <= o.end; sz *= o.factor) {
    plan_t p = make_plan(sz, sz, &o, 0);
    cur_size = sz;
    double secs[o.reps];
    for (int r = -1; r < o.reps; r++) {
      long it = r < 0 ? p.warmup : p.iters;
      if (it == 0) continue;
      fill(src, sz, ++salt);
      double t0 = now_s();
      for (long i = 0; i < it; i++) {
        memcpy(dst, src, sz);
        __asm__ volatile("" ::: "memory");
      }
      double t = (now_s() - t0) / it;
      fill(expect, sz, salt);
      check_bytes("copied bytes", dst, expect, sz);
      if (r >= 0) secs[r] = t;
    }
    csv_row(csv, "memcpy", "memcpy", 1, sz, p.iters, (int)o.reps, secs, sz);
    if (sz * (size_t)o.factor > o.end) break;
  }
  cur_bench = "memcpy_win";
  memset(win, 0, span);
  for (size_t sz = o.begin; sz <= o.end; sz *= o.factor) {
    plan_t p = make_plan(sz, sz, &o, 1);
    cur_size = sz;
    double secs[o.reps];
    for (int r = -1; r < o.reps; r++) {
      long it = r < 0 ? (p.warmup + p.window - 1) / p.window * p.window : p.iters;
      if (it == 0) continue;
      fill(src, sz, ++salt);
      double t0 = now_s();
      for (long k = 0; k < it / p.window; k++) {
        for (long j = 0; j < p.window; j++) memcpy(win + j * sz, src, sz);
        __asm__ volatile("" ::: "memory");
      }
      double t = (now_s() - t0) / it;
      fill(expect, sz, salt);
      for (long j = 0; j < p.window; j++) check_bytes("copied bytes of the window", win + j * sz, expect, sz);
      if (r >= 0) secs[r] = t;
    }
    csv_row(csv, "memcpy", "memcpy_win", 1, sz, p.iters, (int)o.reps, secs, sz);
    if (sz * (size_t)o.factor > o.end) break;
  }
  if (csv != stdout) fclose(csv);
  return 0;
}

/* Physical reference: plain memcpy bandwidth and time in one process, hot buffers (the same source and
 * destination every time, like the one reused target of put_bw). impl "memcpy", bench "memcpy", npes 1.
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
  if (csv != stdout) fclose(csv);
  return 0;
}

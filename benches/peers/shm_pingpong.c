/* Physical reference for put_signal_pp: a hand-written shared-memory flag ping-pong between two processes (fork),
 * no library. Each process owns a data region and a flag on a shared anonymous mapping (MAP_SHARED). One message
 * = stamp the sequence number into the first and last 8 bytes of the source, memcpy it into the peer's region,
 * release-store the sequence number into the peer's flag; the receiver spins (acquire loads + pause) until its
 * flag reaches the number, then checks the stamps, exactly the per-message work of xpushmem-perf's put_signal_pp.
 * One-way time = round trip / 2. impl "shm-raw", bench "put_signal_pp", npes 2. Options as in common.h.
 *
 * Build: gcc -O2 -o shm_pingpong shm_pingpong.c
 */
#include "common.h"
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  volatile uint64_t flag;
  char pad[120];
  volatile uint64_t bar; /* barrier counter (between repeats, untimed) */
} ctl_t;

static void spin_until(volatile uint64_t *f, uint64_t v) {
  while (__atomic_load_n(f, __ATOMIC_ACQUIRE) < v) __builtin_ia32_pause();
}

static ctl_t *ctl[2];
static uint64_t bar_epoch = 0;
static void pair_barrier(int me) {
  bar_epoch++;
  __atomic_fetch_add(&ctl[1 - me]->bar, 1, __ATOMIC_ACQ_REL);
  spin_until(&ctl[me]->bar, bar_epoch);
}

int main(int argc, char **argv) {
  opts_t o;
  parse_opts(argc, argv, &o);
  inject_fault = o.fault;
  size_t region = o.end;
  size_t ctl_sz = (sizeof(ctl_t) + 4095) / 4096 * 4096;
  size_t tot = 2 * (ctl_sz + region);
  unsigned char *base = mmap(NULL, tot, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) { perror("mmap"); return 1; }
  ctl[0] = (ctl_t *)base;
  ctl[1] = (ctl_t *)(base + ctl_sz + region);
  unsigned char *data[2] = {base + ctl_sz, base + 2 * ctl_sz + region};
  size_t rr = (region + 4095) / 4096 * 4096; /* page-aligned local buffers */
  unsigned char *src = aligned_alloc(4096, rr), *expect = aligned_alloc(4096, rr), *chk = aligned_alloc(4096, rr);
  FILE *csv = csv_open(o.csv);
  pid_t pid = fork();
  int me = pid == 0 ? 1 : 0, peer = 1 - me;
  if (me == 1) csv = NULL;
  bind_cpu(o.bind, me, 2);
  uint64_t seq = 0, salt = 0x1234;
  if (selected(&o, "put_signal_pp", "sync"))
    for (size_t sz = o.begin; sz <= o.end; sz *= o.factor) {
      plan_t p = make_plan(sz, sz, &o, 0);
      cur_bench = "put_signal_pp";
      cur_size = sz;
      double secs[o.reps];
      for (int r = -1; r < o.reps; r++) { /* r == -1: warm-up */
        long it = r < 0 ? p.warmup : p.iters;
        if (it == 0) continue;
        uint64_t s = ++salt, b = seq;
        seq += it;
        fill(src, sz, s);
        pair_barrier(me);
        unsigned char probe[16];
        size_t k = sz < 8 ? sz : 8;
        double t0 = now_s();
        for (long i = 1; i <= it; i++) {
          uint64_t q = b + i;
          if (me == 1) {
            spin_until(&ctl[me]->flag, q);
            memcpy(probe, data[me], k);
            if (sz >= 16) { memcpy(probe + 8, data[me] + sz - 8, 8); check_stamp("received message", probe, 16, q); }
            else check_stamp("received message", probe, k, q);
          }
          stamp(src, sz, q);
          memcpy(data[peer], src, sz);
          __atomic_store_n(&ctl[peer]->flag, q, __ATOMIC_RELEASE);
          if (me == 0) {
            spin_until(&ctl[me]->flag, q);
            memcpy(probe, data[me], k);
            if (sz >= 16) { memcpy(probe + 8, data[me] + sz - 8, 8); check_stamp("received message", probe, 16, q); }
            else check_stamp("received message", probe, k, q);
          }
        }
        double t = (now_s() - t0) / it / 2;
        /* whole payload of the last message (both sides; the peer wrote its last message before our flag) */
        fill(expect, sz, s);
        stamp(expect, sz, b + it);
        memcpy(chk, data[me], sz);
        check_bytes("last message, whole payload", chk, expect, sz);
        if (r >= 0) secs[r] = t;
      }
      if (me == 0) csv_row(csv, "shm-raw", "put_signal_pp", 2, sz, p.iters, (int)o.reps, secs, sz);
      if (sz * (size_t)o.factor > o.end) break;
    }
  if (me == 1) _exit(0);
  int st;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st)) { fprintf(stderr, "shm_pingpong: child failed\n"); return 1; }
  if (csv != stdout) fclose(csv);
  return 0;
}

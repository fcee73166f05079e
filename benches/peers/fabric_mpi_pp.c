/* Open MPI's counterpart of the put_signal ping-pong, for the fabric comparison (scripts/bench-fabric.sh runs it
 * with --mca btl tcp,self --mca osc pt2pt: one-sided over TCP). MPI has no put-with-signal; the same ordering is
 * built from its one-sided calls on an MPI_Win_allocate window in one passive-target epoch (MPI_Win_lock_all):
 * MPI_Put of the data, MPI_Win_flush (complete at the target), then the signal as MPI_Accumulate(MPI_REPLACE) of
 * the sequence number on a 64-bit word and MPI_Win_flush. The receiver waits for its word with MPI_Win_sync and
 * MPI_Iprobe (which drive Open MPI's progress) in a loop, checks the stamps and answers the same way. One-way
 * time = round trip / 2. Options and CSV rows as in common.h; impl "mpi-alloc", bench put_signal_pp, 2 ranks.
 *
 * Build: mpicc -O2 -o fabric_mpi_pp fabric_mpi_pp.c
 * Run:   mpirun -n 2 --mca pml ob1 --mca btl tcp,self --mca osc pt2pt ./fabric_mpi_pp [-b 8 -e 4M ...]
 */
#include "common.h"
#include <mpi.h>

static MPI_Win win;
static unsigned char *region; /* [flag (8 bytes, padded to 64) | data] */
static unsigned char *src;
static int me, peer;
static uint64_t seq;

static volatile uint64_t *flag(void) { return (volatile uint64_t *)region; }

static void wait_flag(uint64_t q) {
  for (;;) {
    MPI_Win_sync(win);
    if (__atomic_load_n(flag(), __ATOMIC_ACQUIRE) >= q) return;
    int any;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &any, MPI_STATUS_IGNORE);
  }
}

static void put_signal(size_t sz, uint64_t q) {
  static uint64_t operand;
  operand = q;
  MPI_Put(src, (int)sz, MPI_BYTE, peer, 64, (int)sz, MPI_BYTE, win);
  MPI_Win_flush(peer, win); /* delivered: now the signal */
  MPI_Accumulate(&operand, 1, MPI_UINT64_T, peer, 0, 1, MPI_UINT64_T, MPI_REPLACE, win);
  MPI_Win_flush(peer, win);
}

static void check_received(size_t sz, uint64_t q) {
  unsigned char probe[16];
  size_t k = sz < 8 ? sz : 8;
  memcpy(probe, region + 64, k);
  if (sz >= 16) {
    memcpy(probe + 8, region + 64 + sz - 8, 8);
    check_stamp("received message", probe, 16, q);
  } else {
    check_stamp("received message", probe, k, q);
  }
}

/* seconds one way */
static double put_signal_pp(size_t sz, long it) {
  uint64_t b = seq;
  seq += it;
  double t0 = now_s();
  for (long i = 1; i <= it; i++) {
    uint64_t q = b + i;
    if (me == 1) {
      wait_flag(q);
      check_received(sz, q);
    }
    stamp(src, sz, q);
    put_signal(sz, q);
    if (me == 0) {
      wait_flag(q);
      check_received(sz, q);
    }
  }
  return (now_s() - t0) / it / 2;
}

int main(int argc, char **argv) {
  opts_t o;
  parse_opts(argc, argv, &o);
  inject_fault = o.fault;
  int np;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  if (np != 2) {
    if (me == 0) fprintf(stderr, "fabric_mpi_pp: needs exactly 2 ranks, got %d\n", np);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  peer = 1 - me;
  bind_cpu(o.bind, me, 2);
  MPI_Win_allocate((MPI_Aint)(64 + o.end), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &region, &win);
  memset(region, 0, 64 + o.end);
  src = malloc(o.end ? o.end : 1);
  if (!src) { perror("malloc"); MPI_Abort(MPI_COMM_WORLD, 1); }
  MPI_Win_lock_all(0, win);
  MPI_Barrier(MPI_COMM_WORLD);
  FILE *csv = me == 0 ? csv_open(o.csv) : NULL;
  if (selected(&o, "put_signal_pp", "sync")) {
    for (size_t sz = o.begin; sz <= o.end; sz *= (size_t)o.factor) {
      plan_t p = make_plan(sz, sz, &o, 0);
      cur_bench = "put_signal_pp";
      cur_size = sz;
      double secs[o.reps];
      for (int r = -1; r < o.reps; r++) {
        long it = r < 0 ? p.warmup : p.iters;
        if (it == 0) continue;
        fill(src, sz, 0x5eed + (uint64_t)r);
        MPI_Barrier(MPI_COMM_WORLD);
        double t = put_signal_pp(sz, it);
        MPI_Barrier(MPI_COMM_WORLD);
        if (r >= 0) secs[r] = t;
      }
      if (me == 0) csv_row(csv, "mpi-alloc", "put_signal_pp", 2, sz, p.iters, (int)o.reps, secs, sz);
      if (sz * (size_t)o.factor > o.end) break;
    }
  }
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
  free(src);
  if (csv && csv != stdout) fclose(csv);
  MPI_Finalize();
  return 0;
}

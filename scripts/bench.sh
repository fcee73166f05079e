#!/usr/bin/env bash
# Performance suite, side by side with Open MPI's OpenSHMEM and MPI on this machine, in one run:
#   1. installs Open MPI (openmpi-bin, libopenmpi-dev) if missing,
#   2. builds xpushmem-perf (release) and the C peers of benches/peers/ (oshcc, mpicc, gcc),
#   3. runs, one after another and with identical sizes, iteration plans and PE counts:
#      memcpy probe, hand-written shared-memory ping-pong, then at 2 PEs xpushmem / Open MPI SHMEM / MPI
#      (shared and regular windows), interleaved rounds of the ping-pongs, the small collectives and the
#      bandwidths against memcpy (every implementation once per round), then at every other PE count of BENCH_PES
#      the barriers, collectives and ops (bound one PE per core when they fit, oversubscribed otherwise),
#   4. writes docs/PERFORMANCE.md and the charts in docs/perf/ (the page's scaling section, measured with a core
#      per PE by scripts/bench-scale.sh on another machine, is carried over as it is).
# Environment: BENCH_PES (PE counts, default "2 4"; e.g. "2 4 8 16" on a machine with 16 cores), BENCH_ARGS
# (default "-b 8 -e 64M -f 2 -r 5"), BENCH_ARGS4 (the runs above 2 PEs, default "-b 8 -e 4M -f 4 -i 200 -w 20 -r 5":
# oversubscribed runs are slow), BENCH_COPY_COMPARE (default 1: also run put/get bandwidth at 2 PEs with the
# non-temporal copy cutover off, XPUSHMEM_NT_COPY_SIZE=off, as a comparison), BENCH_BW_ROUNDS (default 3: per pass,
# interleaved bandwidth rounds in which the memcpy probe, xpushmem's put_bw/get_bw, the same with NT copies off and
# Open MPI SHMEM's put_bw/get_bw each run once, in alternating order; the page's bandwidth-vs-memcpy verdicts are
# the medians of the per-round ratios; 0: none, the verdicts then divide medians of separate runs), BENCH_BW_ARGS
# (their options, default "-b 64K -e 64M -f 2 -r 5", the range of the bandwidth targets), BENCH_PASSES (default 2: the whole sequence
# runs this many times, one pass after the other; a pass is skipped when it would end after BENCH_DEADLINE seconds
# from the start, default 780, so that the script stays within about 13 minutes on a loaded machine), BENCH_OUT (results dir), CARGO_TARGET_DIR (default
# target-perf), BENCH_TIMEOUT (seconds per program, default 300), QUIET_WAIT (seconds to wait for a quiet
# machine before each program, default 5), BENCH_DOC (default docs/PERFORMANCE.md), BENCH_PNG (default docs/perf).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
start=$(date +%s)
ARGS2=(${BENCH_ARGS:--b 8 -e 64M -f 2 -r 5})
ARGS4=(${BENCH_ARGS4:--b 8 -e 4M -f 4 -i 200 -w 20 -r 5})
read -r -a PES <<<"${BENCH_PES:-2 4}"
NCPU=$(nproc)
COPY_COMPARE="${BENCH_COPY_COMPARE:-1}"
BW_ROUNDS="${BENCH_BW_ROUNDS:-3}"
BW_ARGS=(${BENCH_BW_ARGS:--b 64K -e 64M -f 2 -r 5})
PASSES="${BENCH_PASSES:-2}"
DEADLINE="${BENCH_DEADLINE:-780}"
ARGS=("${ARGS2[@]}")
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target-perf}"
OUT="${BENCH_OUT:-$CARGO_TARGET_DIR/bench-results}"
DOC="${BENCH_DOC:-$repo/docs/PERFORMANCE.md}"
PNG="${BENCH_PNG:-$repo/docs/perf}"
T="${BENCH_TIMEOUT:-300}"
QUIET_WAIT="${QUIET_WAIT:-5}"
BIN="$OUT/bin"

# ---- 1. Open MPI (and a C compiler) -------------------------------------------------------------------------
pkgs=()
command -v oshcc >/dev/null && command -v mpicc >/dev/null && command -v oshrun >/dev/null ||
  pkgs+=(openmpi-bin libopenmpi-dev)
command -v gcc >/dev/null || pkgs+=(gcc)
if ((${#pkgs[@]})); then
  echo "== installing ${pkgs[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${pkgs[@]}"
fi

# ---- 2. build ------------------------------------------------------------------------------------------------
echo "== building xpushmem-perf (release) and the C peers"
cargo build --release -q -p xpushmem-perf -p xpushmem -p xpushmem-launch --bins
PERF="$CARGO_TARGET_DIR/release/xpushmem-perf"
RUN="$CARGO_TARGET_DIR/release/xpushmem-run"
rm -rf "$OUT"
mkdir -p "$BIN"
P=benches/peers
gcc -O2 -Wall -o "$BIN/memcpy_probe" $P/memcpy_probe.c
gcc -O2 -Wall -o "$BIN/shm_pingpong" $P/shm_pingpong.c
oshcc -O2 -Wall -o "$BIN/oshmem_bench" $P/oshmem_bench.c
mpicc -O2 -Wall -o "$BIN/mpi_bench" $P/mpi_bench.c

# ---- 3. run --------------------------------------------------------------------------------------------------
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader}"
# OpenSHMEM's symmetric heap must hold the benchmark buffers (2 x 64 MiB x max(PEs, 2) and a reduction work array);
# Open MPI reads SHMEM_SYMMETRIC_HEAP_SIZE (or SMA_SYMMETRIC_SIZE), not the standard's SHMEM_SYMMETRIC_SIZE.
export SHMEM_SYMMETRIC_SIZE="${SHMEM_SYMMETRIC_SIZE:-1536M}"
export SHMEM_SYMMETRIC_HEAP_SIZE="${SHMEM_SYMMETRIC_HEAP_SIZE:-$SHMEM_SYMMETRIC_SIZE}"
# Open MPI 4.1.4 (Debian) segfaults in shmem_finalize unless osc rdma is excluded (research/baseline_peers.md).
OSH=(oshrun --mca osc ^rdma)
MPI=(mpirun)
OVER=(--oversubscribe)

busy() { # % of CPU used by anything over one second
  local a b c d e f g h t1 i1 t2 i2
  read -r _ a b c d e f g h _ </proc/stat; t1=$((a + b + c + d + e + f + g + h)); i1=$((d + e))
  sleep 1
  read -r _ a b c d e f g h _ </proc/stat; t2=$((a + b + c + d + e + f + g + h)); i2=$((d + e))
  echo $((100 * ((t2 - t1) - (i2 - i1)) / (t2 - t1)))
}
wait_quiet() { # wait up to QUIET_WAIT s for < 10% busy; print the last reading (QUIET_WAIT=0: do not measure)
  ((QUIET_WAIT > 0)) || { echo "?"; return; }
  local b k
  b=$(busy)
  for ((k = 1; k < QUIET_WAIT && b >= 10; k++)); do b=$(busy); done
  echo "$b"
}

META="$OUT/meta.txt"
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- shmem benches 2>/dev/null || echo ' (+ uncommitted changes)')"
  echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs available"
  echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "kernel: $(uname -r)"
  echo "Open MPI: $(ompi_info --version 2>/dev/null | head -1 | sed 's/^Open MPI //') (oshmem: OpenSHMEM 1.4 API; Debian MCA defaults + btl ${OMPI_MCA_btl}; oshrun --mca osc ^rdma)"
  echo "compilers: $(rustc --version | cut -d' ' -f1-2), $(gcc --version | head -1)"
  echo "options, 1-2 processes: ${ARGS2[*]} (every implementation)"
  echo "options, more processes: ${ARGS4[*]} (every implementation)"
  echo "bandwidth rounds: ${BW_ROUNDS} per pass, options ${BW_ARGS[*]} (memcpy probe, xpushmem$( ((COPY_COMPARE)) && echo ', xpushmem NT copies off'), Open MPI SHMEM; each once per round, order alternating)"
  echo "PE counts: ${PES[*]} (bound one per core up to ${NCPU}, oversubscribed above)"
} >"$META"

fails=()
run() { # label csv-name cmd...
  local label=$1 name=$2 b t0
  shift 2
  b=$(wait_quiet)
  echo "== $label (machine ${b}% busy before start)"
  t0=$(date +%s)
  if ! timeout "$T" "$@" --csv "$OUT/$name.csv" "${ARGS[@]}"; then
    echo "!! $label FAILED" >&2
    fails+=("$label")
  fi
  echo "load ${pass:+pass $pass, }$label: ${b}% of the CPU busy before it started; ran $(($(date +%s) - t0)) s" >>"$META"
}

pass_start=$(date +%s)
for ((pass = 1; pass <= PASSES; pass++)); do
  now=$(date +%s)
  if ((pass > 1 && now - start + (now - pass_start) / (pass - 1) > DEADLINE)); then
    echo "== skipping pass $pass of $PASSES: it would end after the ${DEADLINE} s deadline"
    echo "passes: $((pass - 1)) of $PASSES (the next one would have ended after the ${DEADLINE} s deadline)" >>"$META"
    break
  fi
  echo "== pass $pass of $PASSES"
  p="p$pass"
  ARGS=("${ARGS2[@]}")
  run "memcpy probe" memcpy-$p "$BIN/memcpy_probe"
  run "shm flag ping-pong" shm-raw-$p "$BIN/shm_pingpong"
  run "xpushmem, 2 PEs" xpushmem-2-$p "$RUN" -n 2 "$PERF" all --quiet
  run "Open MPI SHMEM, 2 PEs" oshmem-2-$p "${OSH[@]}" -np 2 "$BIN/oshmem_bench"
  run "MPI, 2 ranks (shared window, collectives)" mpi-2-$p "${MPI[@]}" -n 2 "$BIN/mpi_bench" --win shared
  # MPI_Compare_and_swap on MPI_Win_allocate (osc rdma) crashes the target in Open MPI 4.1.4: not run there.
  run "MPI, 2 ranks (MPI_Win_allocate)" mpi-alloc-2-$p "${MPI[@]}" -n 2 "$BIN/mpi_bench" --win alloc \
    put_lat get_lat put_bw get_bw fetch_add_lat
  # Small-message ping-pongs move a lot with where the hypervisor runs the two vCPUs (sibling threads or not),
  # so they also run in three tight interleaved rounds; the page aggregates every run of a cell.
  ARGS=(-b 8 -e 64K -f 2 -r 5)
  for r in 1 2 3; do
    run "ping-pong round $r: shm" shm-raw-$p-r$r "$BIN/shm_pingpong"
    run "ping-pong round $r: xpushmem" xpushmem-2-$p-r$r "$RUN" -n 2 "$PERF" put_signal_pp --quiet
    run "ping-pong round $r: Open MPI SHMEM" oshmem-2-$p-r$r "${OSH[@]}" -np 2 "$BIN/oshmem_bench" put_signal_pp
  done
  # The small-message collectives, barriers and all-to-alls measure a fixed cost of a microsecond or two, which
  # moves with the vCPUs' placement as much as the ping-pongs do: they too run in three interleaved rounds (every
  # implementation once per round, same options), on top of the full sweeps above.
  ARGS=(-b 8 -e 2K -f 2 -r 5)
  for r in 1 2 3; do
    run "small collectives round $r: xpushmem" xpushmem-2-$p-c$r "$RUN" -n 2 "$PERF" barrier_all coll ops --quiet
    run "small collectives round $r: Open MPI SHMEM" oshmem-2-$p-c$r "${OSH[@]}" -np 2 "$BIN/oshmem_bench" barrier_all coll
    run "small collectives round $r: MPI" mpi-2-$p-c$r "${MPI[@]}" -n 2 "$BIN/mpi_bench" --win shared barrier_all coll ops
  done
  # Bandwidth against memcpy: the VM's performance mode moves a copy's bandwidth by 10-30% within minutes, so a
  # memcpy probe run at another time than put_bw/get_bw compares two modes. In each round every implementation
  # runs once, back to back with the same options, the order reversed every other round (so that neither side
  # always runs first); the report pairs the runs of a round (its files in rounds/bw-PASS-rROUND/) and takes the
  # median of the per-round ratios. The runs also count as ordinary runs of their cells.
  ARGS=("${BW_ARGS[@]}")
  for ((r = 1; r <= BW_ROUNDS; r++)); do
    rd="rounds/bw-$p-r$r"
    mkdir -p "$OUT/$rd"
    order=(memcpy xpushmem)
    ((COPY_COMPARE)) && order+=(nt-off) # the copy paths without the non-temporal stores above the cutover
    order+=(oshmem)
    ((r % 2)) || mapfile -t order < <(printf '%s\n' "${order[@]}" | tac)
    for k in "${order[@]}"; do
      case $k in
      memcpy) run "bandwidth round $r: memcpy probe" "$rd/memcpy" "$BIN/memcpy_probe" ;;
      xpushmem) run "bandwidth round $r: xpushmem" "$rd/xpushmem" "$RUN" -n 2 "$PERF" put_bw get_bw --quiet ;;
      nt-off) run "bandwidth round $r: xpushmem, XPUSHMEM_NT_COPY_SIZE=off" "$rd/xpushmem-nt-off" \
        env XPUSHMEM_NT_COPY_SIZE=off "$RUN" -n 2 "$PERF" put_bw get_bw --quiet --label xpushmem-nt-off ;;
      oshmem) run "bandwidth round $r: Open MPI SHMEM" "$rd/oshmem" "${OSH[@]}" -np 2 "$BIN/oshmem_bench" put_bw get_bw ;;
      esac
    done
  done
  if ((COPY_COMPARE && BW_ROUNDS == 0)); then
    # The copy paths without the non-temporal stores above the cutover (the page shows both).
    ARGS=("${ARGS2[@]}")
    run "xpushmem, 2 PEs, XPUSHMEM_NT_COPY_SIZE=off" xpushmem-nt-off-2-$p env XPUSHMEM_NT_COPY_SIZE=off \
      "$RUN" -n 2 "$PERF" put_bw get_bw --quiet --label xpushmem-nt-off
  fi
  ARGS=("${ARGS4[@]}")
  for n in "${PES[@]}"; do
    ((n == 2)) && continue
    over=()
    ((n > NCPU)) && over=("${OVER[@]}")
    run "xpushmem, $n PEs" xpushmem-$n-$p "$RUN" -n "$n" "$PERF" barrier_all sync_all coll ops --quiet
    run "Open MPI SHMEM, $n PEs" oshmem-$n-$p "${OSH[@]}" -np "$n" "${over[@]}" "$BIN/oshmem_bench" barrier_all sync_all coll
    run "MPI, $n ranks" mpi-$n-$p "${MPI[@]}" -n "$n" "${over[@]}" "$BIN/mpi_bench" barrier_all coll ops
    # Small messages again, interleaved (as at 2 PEs).
    ARGS=(-b 8 -e 2K -f 4 -i 200 -w 20 -r 5)
    for r in 1 2; do
      run "small collectives round $r: xpushmem, $n PEs" xpushmem-$n-$p-c$r "$RUN" -n "$n" "$PERF" barrier_all coll ops --quiet
      run "small collectives round $r: Open MPI SHMEM, $n PEs" oshmem-$n-$p-c$r "${OSH[@]}" -np "$n" "${over[@]}" "$BIN/oshmem_bench" barrier_all coll
      run "small collectives round $r: MPI, $n ranks" mpi-$n-$p-c$r "${MPI[@]}" -n "$n" "${over[@]}" "$BIN/mpi_bench" barrier_all coll ops
    done
    ARGS=("${ARGS4[@]}")
  done
done
pass=""
# Diagnostic, not a target figure: the 4-PE xpushmem run without the busy-poll phase of the runtime's waits
# (XPUSHMEM_SPIN_COUNT=0), to show what the wait back-off costs when PEs outnumber cores.
if ((NCPU < 4)) && [[ " ${PES[*]} " == *" 4 "* ]]; then
  ARGS=(-b 8 -e 32K -f 4 -i 200 -w 20 -r 5)
  run "xpushmem, 4 PEs, XPUSHMEM_SPIN_COUNT=0 (diagnostic)" xpushmem-4-spin0 env XPUSHMEM_SPIN_COUNT=0 \
    "$RUN" -n 4 "$PERF" barrier_all sync_all coll ops --quiet --label xpushmem-spin0
fi

# The device path on ze-emu (device heaps in Level Zero device memory, IPC between the PEs, copy-engine RMA and
# device-library atomics, kernels on Intel's OpenCL CPU runtime): shows that the path works end to end and what
# the emulation costs; it says nothing about an Intel GPU.
bash scripts/setup-device.sh >/dev/null
cargo build --release -q -p ze-emu
# shellcheck source=/dev/null
source scripts/device-env.sh
ARGS=(-b 8 -e 1M -f 8 -i 200 -w 20 -r 3)
run "xpushmem on ze-emu, 2 PEs (device heaps)" xpushmem-ze-emu-2 env XPUSHMEM_HEAP=device \
  ZE_ENABLE_ALT_DRIVERS="$CARGO_TARGET_DIR/release/libze_emu.so" \
  "$RUN" -n 2 "$PERF" put_lat get_lat put_bw put_signal_pp fetch_add_lat barrier_all --quiet --label xpushmem-ze-emu

# ---- 4. report -----------------------------------------------------------------------------------------------
echo "measurement time: $(($(date +%s) - start)) s including builds" >>"$META"
mkdir -p "$PNG"
# The charts of the page's scaling section (scale_*.png, scripts/bench-scale.sh) stay with the section it carries over.
find "$PNG" -maxdepth 1 -name '*.png' ! -name 'scale_*.png' -delete
analysis=()
[ -f benches/report/analysis.md ] && analysis=(--analysis benches/report/analysis.md)
"$PERF" report --results "$OUT" --md "$DOC" --png-dir "$PNG" "${analysis[@]}"
echo "== wrote $DOC and $(ls "$PNG" | wc -l) charts in $PNG ($(($(date +%s) - start)) s)"
# ---- fabric: xpushmem over libfabric tcp, raw libfabric, Open MPI over TCP (scripts/bench-fabric.sh); its own
# section of the page, put in after the report above wrote the rest.
BENCH_FABRIC_OUT="$OUT/fabric" BENCH_DOC="$DOC" BENCH_TIMEOUT="$T" bash scripts/bench-fabric.sh || fails+=("fabric")

if ((${#fails[@]})); then
  echo "!! failed: ${fails[*]}" >&2
  exit 1
fi

#!/usr/bin/env bash
# The device-side runner of scripts/bench-scale.sh, shipped as .scale/run.sh next to the stripped xpushmem-perf and
# xpushmem-run, benches/peers/{mpi_bench.c,common.h} and build.txt. Run on a machine with a core per PE (16 cores
# for 2-16 PEs), Open MPI with mpicc there, no Rust needed:
#   OUT=/some/dir bash .scale/run.sh
# It compiles mpi_bench, then measures xpushmem (xpushmem-run, PEs bound one per core) and MPI (mpirun, vader shared
# memory, --bind-to core) back to back at every PE count, in SCALE_ROUNDS interleaved rounds (every PE count and
# implementation once per round; xpushmem first in odd rounds, MPI first in even ones: a fixed order measures
# position, the run after another program's being slower on the lent machine), the collectives and ops from 8 B to 256 KiB; then issue 29's MoE step (xpushmem-perf's
# ep_step and ep_step_vdev_2d against mpi_bench's ep_step, the all_to_all_single reference in C: torch cannot be
# carried there) at every PE count, the largest first, within its own time budget; then, time allowing, the large
# sizes (2 MiB and 16 MiB) in SCALE_LARGE_ROUNDS rounds (default SCALE_ROUNDS; a large round takes about 100 s). CSVs (xp-N-rR.csv, mpi-N-rR.csv, xp-N-ep-rR.csv, mpi-N-ep-rR.csv,
# xp-N-large-rR.csv, ...), the programs' stderr (*.err) and meta.txt go to $OUT; bring them back and run
# `scripts/bench-scale.sh report DIR`.
# Environment: OUT (required), SCALE_PES (default "2 4 8 16"), SCALE_ROUNDS (default 2), SCALE_LARGE_ROUNDS (default SCALE_ROUNDS), SCALE_ARGS (default
# "-b 8 -e 256K -f 8 -r 5 --coll-iters 300"), SCALE_LARGE_ARGS (default "-b 2M -e 16M -f 8 -r 3 --coll-iters 20";
# "none": no large sizes), SCALE_EP_ARGS (the MoE step's options, default "-w 1 -r 1 --coll-iters 5 --budget 32M":
# one warm-up step, then per case up to 5 steps, fewer for the large cases (32 MiB of tokens per rank over the
# steps, at least 2), the slowest rank's median step; "none": no MoE step), SCALE_EP_XP (xpushmem's MoE benchmarks,
# default "ep_step ep_step_vdev_2d"; ep_step_expert_major is the third), SCALE_EP_BUDGET (seconds after which no
# new MoE program starts, default 100, so that the part ends within about 120 s), SCALE_DEADLINE (seconds from the start after which no new program starts, default 400),
# SCALE_TIMEOUT (seconds per program, default 120), SCALE_PACK (1: at the end, everything in $OUT goes into one
# $OUT/scale.tar.gz and the loose files are removed; the lent device brings back at most 8 files from $OUT, the
# runs write about 33).
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${OUT:?set OUT to the folder for the CSVs}"
mkdir -p "$OUT"
start=$(date +%s)
read -r -a PES <<<"${SCALE_PES:-2 4 8 16}"
ROUNDS="${SCALE_ROUNDS:-2}"
LARGE_ROUNDS="${SCALE_LARGE_ROUNDS:-$ROUNDS}"
read -r -a ARGS <<<"${SCALE_ARGS:--b 8 -e 256K -f 8 -r 5 --coll-iters 300}"
LARGE="${SCALE_LARGE_ARGS:--b 2M -e 16M -f 8 -r 3 --coll-iters 20}"
EP="${SCALE_EP_ARGS:--w 1 -r 1 --coll-iters 5 --budget 32M}"
read -r -a EP_XP <<<"${SCALE_EP_XP:-ep_step ep_step_vdev_2d}"
EP_BUDGET="${SCALE_EP_BUDGET:-100}"
DEADLINE="${SCALE_DEADLINE:-400}"
T="${SCALE_TIMEOUT:-120}"
XP_BENCHES=(barrier_all team_barrier bcast alltoall fcollect reduce_sum all_to_all_vdev all_to_all_vdev_2d)
MPI_BENCHES=(barrier_all team_barrier bcast alltoall alltoallv fcollect reduce_sum)
# shellcheck source=scripts/scale-common.sh
. "$here/common.sh"

work=$(mktemp -d)
cp "$here/xpushmem-perf" "$here/xpushmem-run" "$work/"
chmod +x "$work/xpushmem-perf" "$work/xpushmem-run"
build_mpi_bench "$here" "$work" "$OUT" || exit 1

META="$OUT/meta.txt"
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  [ -f "$here/build.txt" ] && cat "$here/build.txt"
  echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs available, $(lscpu 2>/dev/null | awk -F: '/^NUMA node\(s\)/ {gsub(/ /, "", $2); print $2}') NUMA node(s), $(lscpu 2>/dev/null | awk -F: '/^Thread\(s\) per core/ {gsub(/ /, "", $2); print $2}') thread(s) per core"
  echo "CPU family/model, caches: $(host_caches)"
  echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "kernel: $(uname -r)"
  echo "Open MPI: $(mpirun --version 2>/dev/null | head -1 | sed 's/^mpirun (Open MPI) //'), btl ${OMPI_MCA_btl}, vader single copy ${OMPI_MCA_btl_vader_single_copy_mechanism}, mpirun --bind-to core"
  echo "xpushmem: xpushmem-run, PEs bound one per core (xpushmem-perf --bind auto), XPUSHMEM_SYMMETRIC_SIZE=${XPUSHMEM_SYMMETRIC_SIZE}"
  echo "C compiler: $(mpicc --version 2>/dev/null | head -1)"
  echo "PE counts: ${PES[*]}"
  echo "rounds: ${ROUNDS} (the large sizes: ${LARGE_ROUNDS}), interleaved (per round every PE count, xpushmem first in odd rounds, MPI first in even ones)"
  echo "options, the sweep: ${ARGS[*]} (both implementations)"
  echo "options, large sizes: ${LARGE} (both implementations)"
  echo "options, MoE step: ${EP} (xpushmem ${EP_XP[*]}, MPI ep_step), PE counts largest first, no new MoE program after ${EP_BUDGET} s"
} >"$META"
cat "$META"

fails=()
late() { (($(date +%s) - start > DEADLINE)); }
run() { # name cmd... (the options follow)
  local name=$1 t0 rc
  shift
  if late; then
    echo "skipped $name: past the ${DEADLINE} s deadline" | tee -a "$META"
    return
  fi
  t0=$(date +%s)
  timeout "$T" "$@" --csv "$OUT/$name.csv" >/dev/null 2>"$OUT/$name.err"
  rc=$?
  ((rc == 0)) || fails+=("$name rc=$rc")
  echo "run $name: rc $rc, $(($(date +%s) - t0)) s" | tee -a "$META"
}
xp() { # name npes args...
  local name=$1 n=$2
  shift 2
  run "$name" "$work/xpushmem-run" -n "$n" --timeout "$T" "$work/xpushmem-perf" "${XP_SEL[@]}" --quiet "$@"
}
mpi() { # name npes args...
  local name=$1 n=$2
  shift 2
  mpi_bench_cmd "$work" "$n"
  run "$name" "${MPI_CMD[@]}" "${MPI_SEL[@]}" "$@"
}
XP_SEL=("${XP_BENCHES[@]}")
MPI_SEL=("${MPI_BENCHES[@]}")

pair() { # round npes name-suffix options...: xpushmem and MPI, xpushmem first in odd rounds, MPI first in even ones
  local r=$1 n=$2 suffix=$3
  shift 3
  if ((r % 2)); then
    xp "xp-$n$suffix-r$r" "$n" "$@"
    mpi "mpi-$n$suffix-r$r" "$n" "$@"
  else
    mpi "mpi-$n$suffix-r$r" "$n" "$@"
    xp "xp-$n$suffix-r$r" "$n" "$@"
  fi
}

sweep() { # rounds file-name-infix options...: every round, every PE count, both implementations
  local rounds=$1 infix=$2 r n
  shift 2
  for ((r = 1; r <= rounds; r++)); do
    for n in "${PES[@]}"; do
      pair "$r" "$n" "$infix" "$@"
    done
  done
}
sweep "$ROUNDS" "" "${ARGS[@]}"
if [ "$EP" != none ]; then
  # Issue 29's MoE step: the PE counts largest first (the targets are at 8 and 16), each round within the budget.
  read -r -a EA <<<"$EP"
  XP_SEL=("${EP_XP[@]}")
  MPI_SEL=(ep_step)
  ep_start=$(date +%s)
  for ((r = 1; r <= ROUNDS; r++)); do
    for n in $(printf '%s\n' "${PES[@]}" | sort -rn); do
      if (($(date +%s) - ep_start > EP_BUDGET)); then
        echo "skipped xp-$n-ep-r$r and mpi-$n-ep-r$r: past the MoE step's ${EP_BUDGET} s" | tee -a "$META"
        continue
      fi
      pair "$r" "$n" -ep "${EA[@]}"
    done
  done
  echo "MoE step time: $(($(date +%s) - ep_start)) s" >>"$META"
  XP_SEL=("${XP_BENCHES[@]}")
  MPI_SEL=("${MPI_BENCHES[@]}")
fi
if [ "$LARGE" != none ]; then
  read -r -a LA <<<"$LARGE"
  sweep "$LARGE_ROUNDS" -large "${LA[@]}"
fi
echo "measurement time: $(($(date +%s) - start)) s" >>"$META"
rm -rf "$work"
# Empty stderr files say nothing.
find "$OUT" -maxdepth 1 -name '*.err' -empty -delete
if [ "${SCALE_PACK:-0}" = 1 ]; then
  (cd "$OUT" && files=$(find . -maxdepth 1 -type f ! -name scale.tar.gz -printf '%P\n' | sort) &&
    tar -czf scale.tar.gz $files && rm -f $files) || echo "!! packing $OUT failed" >&2
fi
if ((${#fails[@]})); then
  echo "failed: ${fails[*]}" | tee -a "$META" >&2
  exit 1
fi

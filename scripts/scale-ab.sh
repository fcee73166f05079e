#!/usr/bin/env bash
# The A/B runner of scripts/bench-scale.sh, shipped as .scale/ab.sh: two variants of xpushmem and MPI in interleaved
# rounds, the order rotating every round (a fixed order measures position: the first run after mpirun is slower on
# the lent machine), on a machine with a core per PE. Variant A is the previous build (.scale/old/, staged by
# `scripts/bench-scale.sh stage-old REV`) or, without one, this build; variant B is this build. AB_ENV_A and
# AB_ENV_B add environment settings to a variant (`XPUSHMEM_BROADCAST_ALGORITHM=agreement`), so one build A/Bs a
# setting. Compare with `xpushmem-perf`'s CSVs: impl column xp-a, xp-b and mpi.
# Environment: OUT (required), AB_PES (default "2 4 8 16"), AB_ROUNDS (default 7), AB_ARGS (default
# "-b 8 -e 32K -f 8 -r 5 --coll-iters 300"), AB_XP (xpushmem's benchmarks, default the collectives and ops),
# AB_MPI (mpi_bench's, default the collectives), AB_ENV_A, AB_ENV_B (space-separated VAR=value), AB_DEADLINE (seconds
# after which no new round starts, default 150), AB_PACK (1: the CSVs into one ab.tar.gz; the lent device brings back
# few files).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${OUT:?set OUT to the folder for the CSVs}"
mkdir -p "$OUT"
read -r -a PES <<<"${AB_PES:-2 4 8 16}"
ROUNDS="${AB_ROUNDS:-7}"
read -r -a ARGS <<<"${AB_ARGS:--b 8 -e 32K -f 8 -r 5 --coll-iters 300}"
read -r -a XB <<<"${AB_XP:-barrier_all bcast alltoall fcollect reduce_sum all_to_all_vdev all_to_all_vdev_2d}"
read -r -a MB <<<"${AB_MPI:-barrier_all bcast alltoall alltoallv fcollect reduce_sum}"
read -r -a ENV_A <<<"${AB_ENV_A:-}"
read -r -a ENV_B <<<"${AB_ENV_B:-}"
DEADLINE="${AB_DEADLINE:-150}"
# shellcheck source=scripts/scale-common.sh
. "$here/common.sh"

work=$(mktemp -d)
mkdir -p "$work/a" "$work/b"
cp "$here/xpushmem-perf" "$here/xpushmem-run" "$work/b/"
a_build=this
if [ -x "$here/old/xpushmem-perf" ]; then
  cp "$here/old/xpushmem-perf" "$here/old/xpushmem-run" "$work/a/"
  a_build="$(cat "$here/old/build.txt" 2>/dev/null | head -1)"
else
  cp "$here/xpushmem-perf" "$here/xpushmem-run" "$work/a/"
fi
chmod +x "$work"/a/* "$work"/b/*
build_mpi_bench "$here" "$work" "$OUT" || exit 1
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "variant A: ${a_build} ${ENV_A[*]}"
  echo "variant B: $(head -1 "$here/build.txt" 2>/dev/null) ${ENV_B[*]}"
  echo "CPU family/model, caches: $(host_caches)"
  echo "PE counts: ${PES[*]}; rounds: ${ROUNDS}, the order of A, B and MPI rotating; options: ${ARGS[*]}"
} >"$OUT/ab-meta.txt"

xp() { # variant npes round
  local v=$1 n=$2 r=$3 e
  if [ "$v" = a ]; then e=("${ENV_A[@]}"); else e=("${ENV_B[@]}"); fi
  env "${e[@]}" timeout 120 "$work/$v/xpushmem-run" -n "$n" --timeout 120 "$work/$v/xpushmem-perf" "${XB[@]}" --quiet \
    "${ARGS[@]}" --label "xp-$v" --csv "$OUT/ab-$n-$v-r$r.csv" >/dev/null 2>>"$OUT/ab-err.txt" ||
    echo "failed: $v at $n PEs, round $r" >>"$OUT/ab-meta.txt"
}
start=$(date +%s)
for ((r = 1; r <= ROUNDS; r++)); do
  if (($(date +%s) - start > DEADLINE)); then
    echo "stopped before round $r: past the ${DEADLINE} s deadline" >>"$OUT/ab-meta.txt"
    break
  fi
  for n in "${PES[@]}"; do
    for k in 0 1 2; do
      case $(((k + r) % 3)) in
      0) xp a "$n" "$r" ;;
      1) xp b "$n" "$r" ;;
      2) mpi_bench_cmd "$work" "$n"
        timeout 120 "${MPI_CMD[@]}" "${MB[@]}" "${ARGS[@]}" --csv "$OUT/ab-$n-mpi-r$r.csv" >/dev/null 2>>"$OUT/ab-err.txt" ||
        echo "failed: mpi at $n PEs, round $r" >>"$OUT/ab-meta.txt" ;;
      esac
    done
  done
done
echo "measurement time: $(($(date +%s) - start)) s" >>"$OUT/ab-meta.txt"
rm -rf "$work"
# An empty stderr file says nothing.
[ -s "$OUT/ab-err.txt" ] || rm -f "$OUT/ab-err.txt"
if [ "${AB_PACK:-0}" = 1 ]; then
  (cd "$OUT" && tar -czf ab.tar.gz ab-*.csv ab-meta.txt $(ls ab-err.txt 2>/dev/null) && rm -f ab-*.csv) || echo "!! packing $OUT failed" >&2
fi

#!/usr/bin/env bash
# The scaling section of docs/PERFORMANCE.md (issue 31): xpushmem's collectives and ops against MPI at 2, 4, 8 and
# 16 PEs, measured on a machine with a core per PE (the 2-core development machine would measure its scheduler).
# That machine has Open MPI but no Rust, so the work is split in three steps:
#   scripts/bench-scale.sh stage          builds in release here and stages into the git-ignored .scale/ (< 64 MiB):
#                                         the stripped xpushmem-perf and xpushmem-run, benches/peers/{mpi_bench.c,
#                                         common.h}, build.txt (commit, compiler) and the runner (scripts/scale-run.sh
#                                         as .scale/run.sh)
#   OUT=DIR bash .scale/run.sh            on the machine with the cores (copy .scale/ there; with the lent device:
#                                         copy .scale/ into the session's own checkout, the one the device tool
#                                         sends, and run with carry [".scale"], the command
#                                         `OUT=$OUT SCALE_PACK=1 bash .scale/run.sh`: the device brings back at
#                                         most 8 files, so the runner packs them into one scale.tar.gz):
#                                         2 interleaved rounds, CSVs and meta.txt into DIR (see scripts/scale-run.sh
#                                         for its options)
#   scripts/bench-scale.sh report DIR     here (DIR may hold the runner's scale.tar.gz): copies DIR's CSVs and meta.txt into benches/results/scale/ (the
#                                         page's data, small) and writes the section into docs/PERFORMANCE.md and
#                                         its charts into docs/perf/scale_*.png (xpushmem-perf scale-report)
#   scripts/bench-scale.sh report         regenerates the section from benches/results/scale/ as committed
#   scripts/bench-scale.sh stage-old REV  after `stage`: builds commit REV in release (a git worktree, its own target
#                                         folder target-perf-old) into .scale/old/, for the A/B runner
#                                         (scripts/scale-ab.sh as .scale/ab.sh: REV's build against this one and MPI,
#                                         interleaved, the order rotating; `OUT=$OUT AB_PACK=1 bash .scale/ab.sh`)
# Environment: CARGO_TARGET_DIR (default target-perf), BENCH_DOC (default docs/PERFORMANCE.md), BENCH_PNG (default
# docs/perf).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target-perf}"
DOC="${BENCH_DOC:-$repo/docs/PERFORMANCE.md}"
PNG="${BENCH_PNG:-$repo/docs/perf}"
DATA="$repo/benches/results/scale"
STAGE="$repo/.scale"
LIMIT=$((64 << 20))

stage() {
  echo "== building in release (xpushmem-perf, xpushmem, xpushmem-launch)"
  cargo build --release -q -p xpushmem-perf -p xpushmem -p xpushmem-launch --bins
  rm -rf "$STAGE"
  mkdir -p "$STAGE"
  local rel="$CARGO_TARGET_DIR/release"
  for b in xpushmem-perf xpushmem-run; do
    strip -o "$STAGE/$b" "$rel/$b"
  done
  cp benches/peers/mpi_bench.c benches/peers/common.h "$STAGE/"
  cp scripts/scale-run.sh "$STAGE/run.sh"
  cp scripts/scale-ab.sh "$STAGE/ab.sh"
  cp scripts/scale-common.sh "$STAGE/common.sh"
  {
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- shmem ops benches launch 2>/dev/null || echo ' (+ uncommitted changes)')"
    echo "build: $(rustc --version | cut -d' ' -f1-2) --release on $(uname -m), binaries stripped"
  } >"$STAGE/build.txt"
  local size
  size=$(du -sb "$STAGE" | cut -f1)
  if ((size > LIMIT)); then
    echo "!! .scale/ is $size bytes, over the 64 MiB a carry may hold" >&2
    exit 1
  fi
  echo "== staged $(ls "$STAGE" | tr '\n' ' ')($((size >> 20)) MiB) in $STAGE"
  echo "   next: on the machine with the cores, OUT=DIR bash .scale/run.sh; then here, scripts/bench-scale.sh report DIR"
}

report() {
  local from=${1:-}
  if [ -n "$from" ]; then
    [ -d "$from" ] || { echo "!! $from: no such folder" >&2; exit 1; }
    if [ -f "$from/scale.tar.gz" ]; then # packed by the runner (SCALE_PACK=1)
      local unpacked
      unpacked=$(mktemp -d)
      tar -xzf "$from/scale.tar.gz" -C "$unpacked"
      from=$unpacked
    fi
    rm -rf "$DATA"
    mkdir -p "$DATA"
    # The runs' CSVs and meta.txt (the raw CSVs are a few tens of KiB: the page's data, regenerable).
    find "$from" -maxdepth 1 \( -name '*.csv' -o -name 'meta.txt' \) -exec cp {} "$DATA/" \;
    local size
    size=$(du -sb "$DATA" | cut -f1)
    ((size < (1 << 20))) || echo "!! warning: $DATA is $size bytes; commit a summary, not the raw files" >&2
  fi
  mkdir -p "$DATA" # none yet: the section says it is not measured
  cargo build --release -q -p xpushmem-perf
  mkdir -p "$PNG"
  rm -f "$PNG"/scale_*.png
  "$CARGO_TARGET_DIR/release/xpushmem-perf" scale-report --results "$DATA" --md "$DOC" --png-dir "$PNG"
  echo "== wrote the scaling section into $DOC and $(ls "$PNG"/scale_*.png 2>/dev/null | wc -l) charts into $PNG"
}

stage_old() {
  local rev=${1:?usage: scripts/bench-scale.sh stage-old REV}
  [ -d "$STAGE" ] || { echo "!! run scripts/bench-scale.sh stage first" >&2; exit 1; }
  local tree
  tree=$(mktemp -d)
  git worktree add -q --detach "$tree" "$rev"
  echo "== building $rev in release (in $tree, target folder target-perf-old)"
  (cd "$tree" && CARGO_TARGET_DIR="$repo/target-perf-old" cargo build --release -q -p xpushmem-perf -p xpushmem-launch --bins)
  local rc=$?
  git worktree remove --force "$tree"
  ((rc == 0)) || exit "$rc"
  mkdir -p "$STAGE/old"
  for b in xpushmem-perf xpushmem-run; do
    strip -o "$STAGE/old/$b" "$repo/target-perf-old/release/$b"
  done
  echo "commit: $(git rev-parse --short "$rev")" >"$STAGE/old/build.txt"
  local size
  size=$(du -sb "$STAGE" | cut -f1)
  ((size <= LIMIT)) || { echo "!! .scale/ is $size bytes, over the 64 MiB a carry may hold" >&2; exit 1; }
  echo "== staged $rev's build in $STAGE/old ($((size >> 20)) MiB in all); next: OUT=DIR AB_PACK=1 bash .scale/ab.sh"
}

case "${1:-stage}" in
stage) stage ;;
stage-old) stage_old "${2:-}" ;;
report) report "${2:-}" ;;
*)
  echo "usage: scripts/bench-scale.sh [stage | stage-old REV | report [DIR]]" >&2
  exit 2
  ;;
esac

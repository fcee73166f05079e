#!/usr/bin/env bash
# Issue #29's benchmark table in one command, for a machine with a core per rank (the targets are at 8 and 16 ranks):
#   bash benches/ep_bench.sh [RANKS ...]          (default: 8 16)
# Builds the release libxpushmem.so, sets up the test venv (scripts/setup-python.sh) with mpi4py when the host has
# an MPI (mpicc), and runs benches/ep_bench.py at each rank count over 128/512/4096 tokens x hidden 1024/7168, top-8:
# under mpirun with the MPI column when mpi4py imports, else with torch.multiprocessing (no MPI column). The tables
# go to stdout, the CSVs to target/ep-bench/. Env: EP_BENCH_ARGS (extra arguments, e.g. "--iters 20").
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
venv="$(bash scripts/setup-python.sh | tail -n 1)"
py="$venv/bin/python"
cargo build --release -p xpushmem-ffi
export XPUSHMEM_LIB_DIR="$repo/target/release" PYTHONPATH="$repo/triton-bridge" XPUSHMEM_SYMMETRIC_SIZE="${XPUSHMEM_SYMMETRIC_SIZE:-8G}"
if ! "$py" -c "import mpi4py" 2>/dev/null && command -v mpicc >/dev/null; then
    "$venv/bin/uv" pip install -q -p "$py" mpi4py || echo "ep_bench.sh: mpi4py did not install; no MPI column" >&2
fi
out="$repo/target/ep-bench"
mkdir -p "$out"
common=(--tokens 128,512,4096 --hidden 1024,7168 --topk 8)
for ranks in "${@:-8 16}"; do
    for r in $ranks; do
        if "$py" -c "import mpi4py" 2>/dev/null && command -v mpirun >/dev/null; then
            # One core per rank; yield when idle so that a rank waiting in MPI does not spin on a shared core.
            mpirun --allow-run-as-root -n "$r" --bind-to core --mca mpi_yield_when_idle 1 \
                -x XPUSHMEM_LIB_DIR -x PYTHONPATH -x XPUSHMEM_SYMMETRIC_SIZE \
                "$py" benches/ep_bench.py --mpi "${common[@]}" --csv "$out/ep_${r}ranks.csv" ${EP_BENCH_ARGS:-}
        else
            "$py" benches/ep_bench.py --ranks "$r" "${common[@]}" --csv "$out/ep_${r}ranks.csv" ${EP_BENCH_ARGS:-}
        fi
    done
done

# Sourced by the device-side runners of scripts/bench-scale.sh (scripts/scale-run.sh and scripts/scale-ab.sh,
# staged as .scale/run.sh and .scale/ab.sh, this file as .scale/common.sh): the environment both implementations
# run under, how mpi_bench is built and launched, and how a host is described.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader}"
# Single-copy (CMA) needs ptrace rights that containers often lack; vader then copies through its FIFOs.
export OMPI_MCA_btl_vader_single_copy_mechanism="${OMPI_MCA_btl_vader_single_copy_mechanism:-none}"
# The 16 MiB all-to-alls at 16 PEs need 2 x 256 MiB of symmetric heap and more (reserved lazily).
export XPUSHMEM_SYMMETRIC_SIZE="${XPUSHMEM_SYMMETRIC_SIZE:-4G}"

# build_mpi_bench SRC_DIR WORK OUT: compiles SRC_DIR/mpi_bench.c into WORK/mpi_bench (errors in OUT/mpicc.err).
build_mpi_bench() {
  if ! mpicc -O2 -Wall -o "$2/mpi_bench" "$1/mpi_bench.c" 2>"$3/mpicc.err"; then
    echo "!! mpicc failed (see $3/mpicc.err)" >&2
    return 1
  fi
  [ -s "$3/mpicc.err" ] || rm -f "$3/mpicc.err"
}

# mpi_bench_cmd WORK NPES: sets MPI_CMD to the command that runs WORK/mpi_bench on NPES ranks, one per core, RMA on
# MPI_Win_allocate_shared (its benchmarks and options follow; a command, so that `timeout` can run it).
mpi_bench_cmd() {
  MPI_CMD=(mpirun -n "$2" --bind-to core "$1/mpi_bench" --win shared)
}

# host_caches: the CPU's family/model numbers and its L2 and L3 (a virtual CPU's model name is generic: these tell
# two hosts apart).
host_caches() {
  echo "$(awk -F: '/^cpu family/ {f=$2} /^model[[:space:]]*:/ {m=$2} END {gsub(/ /, "", f); gsub(/ /, "", m); printf "%s/%s", f, m}' /proc/cpuinfo), $(lscpu 2>/dev/null | awk -F: '/^L2 cache/ {gsub(/^ +/, "", $2); printf "L2 %s, ", $2} /^L3 cache/ {gsub(/^ +/, "", $2); printf "L3 %s", $2}')"
}

#!/usr/bin/env bash
# A single-host Slurm cluster in a folder of its own, for the PMIx bootstrap's test under `srun --mpi=pmix`:
# munged (its key, socket and logs in DIR/munge), slurmctld and one slurmd (node `localhost`, every CPU), configured
# by DIR/slurm.conf on ports of their own, so nothing of the machine's Slurm or munge set-up (if any) is used or
# changed. Debian 12's packages: slurmctld, slurmd, slurm-client, munge (scripts/setup.sh installs them).
#   scripts/slurm-cluster.sh start DIR   start it and wait (30 s at most) until the node is idle; prints
#                                        `export SLURM_CONF=DIR/slurm.conf` for the clients (srun, sinfo)
#   scripts/slurm-cluster.sh stop DIR    stop the daemons started in DIR (their pid files) and keep the logs
# Runs as root (the daemons and the job run as root: SlurmUser=root, munged --force).
set -euo pipefail
cmd="${1:?usage: slurm-cluster.sh start|stop DIR}"
dir="${2:?usage: slurm-cluster.sh start|stop DIR}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
conf="$dir/slurm.conf"

stop() {
    local f pid
    for f in "$dir"/slurmd.pid "$dir"/slurmctld.pid "$dir"/munge/munged.pid; do
        [[ -s "$f" ]] || continue
        pid="$(cat "$f")"
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$f"
    done
}

case "$cmd" in
stop) stop; exit 0 ;;
start) ;;
*) echo "slurm-cluster.sh: unknown command $cmd (start|stop)" >&2; exit 2 ;;
esac

for tool in munged slurmctld slurmd srun sinfo; do
    command -v "$tool" >/dev/null || { echo "slurm-cluster.sh: $tool not found (run scripts/setup.sh)" >&2; exit 127; }
done
stop
# munge: a key of its own; munged wants its folders private.
mkdir -p "$dir/munge" "$dir/state" "$dir/spool"
chmod 700 "$dir/munge"
[[ -s "$dir/munge/munge.key" ]] || head -c 1024 /dev/urandom >"$dir/munge/munge.key"
chmod 400 "$dir/munge/munge.key"
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"

# Two free TCP ports for slurmctld and slurmd.
read -r port_ctl port_d < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
cpus="$(nproc)"
cat >"$conf" <<CONF
ClusterName=xpushmem-test
SlurmctldHost=localhost
SlurmctldPort=$port_ctl
SlurmdPort=$port_d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
export SLURM_CONF="$conf"
slurmctld -f "$conf" -i
slurmd -f "$conf"
for _ in $(seq 300); do
    if sinfo -h -o '%t' 2>/dev/null | grep -qx 'idle'; then
        echo "export SLURM_CONF=$conf"
        exit 0
    fi
    sleep 0.1
done
echo "slurm-cluster.sh: the node did not become idle within 30 s; logs: $dir/slurmctld.log $dir/slurmd.log" >&2
sinfo >&2 || true
stop
exit 1

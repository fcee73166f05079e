#!/usr/bin/env bash
# A single-host Slurm cluster in a folder of its own, for the PMIx bootstrap's test under `srun --mpi=pmix`:
# munged (its key, socket and logs in DIR/munge), slurmctld and one slurmd (node `localhost`, every CPU), configured
# by DIR/slurm.conf on ports of their own, so nothing of the machine's Slurm or munge set-up (if any) is used or
# changed. Debian 12's packages: slurmctld, slurmd, slurm-client, munge (scripts/setup.sh installs them).
#   scripts/slurm-cluster.sh start DIR   start it and wait (30 s at most) until the node is idle; prints
#                                        `export SLURM_CONF=DIR/slurm.conf` for the clients (srun, sinfo)
#   scripts/slurm-cluster.sh start DIR NS_A ADDR_A NS_B ADDR_B
#                                        two nodes instead: `n1` in network namespace NS_A (address ADDR_A, with
#                                        slurmctld) and `n2` in NS_B, each slurmd in a UTS namespace of its own named
#                                        after its node (as on two hosts); run the clients in NS_A
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
    for f in "$dir"/slurmd*.pid "$dir"/slurmctld.pid "$dir"/munge/munged.pid; do
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

ns=("${@:3}")
((${#ns[@]} == 0 || ${#ns[@]} == 4)) || { echo "slurm-cluster.sh: start DIR [NS_A ADDR_A NS_B ADDR_B]" >&2; exit 2; }
# Two free TCP ports for slurmctld and slurmd.
read -r port_ctl port_d < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
cpus="$(nproc)"
if ((${#ns[@]})); then
    ctl_host="n1(${ns[1]})"
    nodes="NodeName=n1 NodeAddr=${ns[1]} CPUs=$cpus State=UNKNOWN
NodeName=n2 NodeAddr=${ns[3]} CPUs=$cpus State=UNKNOWN"
    node_names="n1,n2"
else
    ctl_host="localhost"
    nodes="NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN"
    node_names="localhost"
fi
mkdir -p "$dir/spool/n1" "$dir/spool/n2" "$dir/spool/localhost" "$dir/nodetmp"
cat >"$conf" <<CONF
ClusterName=xpushmem-test
SlurmctldHost=$ctl_host
SlurmctldPort=$port_ctl
SlurmdPort=$port_d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
TmpFS=$dir/nodetmp
$nodes
PartitionName=test Nodes=$node_names Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
export SLURM_CONF="$conf"
trap 'stop' ERR
if ((${#ns[@]})); then
    # Each daemon in its node's network namespace (nsenter, not `ip netns exec`: that mounts a sysfs of its own,
    # without the cgroup file systems slurmd needs), a UTS namespace named after the node, and a mount namespace
    # where the node's TmpFS (DIR/nodetmp) is a folder of its own: the PMIx plugin makes its per-step folders
    # there, under names that would collide between two nodes sharing one /tmp.
    in_node() {
        local netns="$1" name="$2"
        shift 2
        mkdir -p "$dir/nodetmp.$name"
        nsenter --net="/run/netns/$netns" unshare --uts --mount --propagation private sh -c \
            'mount --bind "$1" "$2" && hostname "$0" && shift 2 && exec "$@"' \
            "$name" "$dir/nodetmp.$name" "$dir/nodetmp" "$@"
    }
    in_node "${ns[0]}" n1 slurmctld -f "$conf" -i
    in_node "${ns[0]}" n1 slurmd -f "$conf" -N n1
    in_node "${ns[2]}" n2 slurmd -f "$conf" -N n2
    query=(ip netns exec "${ns[0]}" sinfo)
    want=2
else
    slurmctld -f "$conf" -i
    slurmd -f "$conf"
    query=(sinfo)
    want=1
fi
for _ in $(seq 300); do
    if [[ "$("${query[@]}" -h -N -o '%t' 2>/dev/null | grep -cx 'idle')" == "$want" ]]; then
        echo "export SLURM_CONF=$conf"
        exit 0
    fi
    sleep 0.1
done
echo "slurm-cluster.sh: the nodes did not become idle within 30 s; logs: $dir/slurmctld.log $dir/slurmd.*.log" >&2
"${query[@]}" >&2 || true
stop
exit 1

#!/usr/bin/env bash
# Runs a suite as a SLURM job array on a one-node cluster started here, on localhost, for the
# duration of the run: munged, slurmctld and slurmd with their own config, state, sockets and
# logs in a temporary folder, on ports of their own, stopped (by pid) on exit.
#
#   eval/slurm/run_suite.sh SUITE OUT [LFS]      (as root; Debian 12: apt-get install slurm-wlm munge)
#
# It writes the array script with `lfs suite sbatch SUITE --out OUT --cpus-per-task 1`, submits
# it with `sbatch --wait`, and exits 0 when every array task succeeded. The cluster is what the
# issue's test needs, not a production set-up: root runs the jobs, nothing is constrained
# (proctrack/linuxproc, task/none, cgroup v1 with no constraints: slurm 22.05 has no `disabled`
# cgroup plugin), no accounting. Set LFS_SLURM_KEEP=1 to keep the folder for its logs.
set -euo pipefail

suite=${1:?usage: run_suite.sh SUITE OUT [LFS]}
out=${2:?usage: run_suite.sh SUITE OUT [LFS]}
lfs=${3:-target/release/lfs}

for bin in munged slurmctld slurmd sbatch sinfo; do
    command -v "$bin" >/dev/null || { echo "run_suite.sh: $bin not found (apt-get install slurm-wlm munge)" >&2; exit 3; }
done
[ "$(id -u)" = 0 ] || { echo "run_suite.sh: run as root (slurmd and munged here run as root)" >&2; exit 3; }

dir=$(mktemp -d /tmp/lfs-slurm.XXXXXX)
chmod 755 "$dir"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done
    if [ "${LFS_SLURM_KEEP:-0}" = 1 ]; then echo "run_suite.sh: cluster files kept in $dir" >&2; else rm -rf "$dir"; fi
}
trap cleanup EXIT

# ---- munge: a fresh key and a socket of its own
mkdir -p "$dir/munge"
chmod 711 "$dir/munge"
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged --force --foreground --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" > "$dir/munge/munged.out" 2>&1 &
pids+=($!)

# ---- slurm: one node with this machine's cores and memory
host=$(hostname -s)
cpus=$(nproc)
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
port=$(( 20000 + RANDOM % 20000 ))
mkdir -p "$dir/state" "$dir/spool"
cat > "$dir/slurm.conf" <<EOF
ClusterName=lfs-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
cat > "$dir/cgroup.conf" <<EOF
CgroupPlugin=cgroup/v1
ConstrainCores=no
ConstrainRAMSpace=no
ConstrainDevices=no
EOF
export SLURM_CONF=$dir/slurm.conf

for _ in $(seq 100); do [ -S "$dir/munge/munge.socket" ] && break; sleep 0.1; done
slurmctld -D -i -f "$SLURM_CONF" > "$dir/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" > "$dir/slurmd.out" 2>&1 &
pids+=($!)

state=""
for _ in $(seq 300); do
    state=$(sinfo -h -N -o %t 2>/dev/null | head -1 || true)
    [ "$state" = idle ] && break
    sleep 0.2
done
if [ "$state" != idle ]; then
    echo "run_suite.sh: the node did not come up (state '$state'); logs:" >&2
    tail -n 20 "$dir"/slurmctld.log "$dir"/slurmd.log "$dir"/*.out >&2 || true
    exit 1
fi
echo "run_suite.sh: cluster up ($host, $cpus CPUs, port $port)" >&2

script=$("$lfs" suite sbatch "$suite" --out "$out" --cpus-per-task 1 | awk '{print $2}')
status=0
sbatch --wait "$script" || status=$?
echo "run_suite.sh: sbatch --wait exited with $status" >&2
"$lfs" suite status "$out" >&2 || true
exit "$status"

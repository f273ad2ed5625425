#!/usr/bin/env bash
# local-up.sh: install (Debian 12 packages) and start, idempotently and as root, the
# "local" test cluster: Slurm 22.05 on this host with slurmctld, N slurmd "nodes"
# (n1..nN, one host, one port each), slurmdbd accounting on MariaDB, a default
# partition "normal" and a preempting partition "high".
# A re-run with everything up only checks (about 1 s); anything dead is restarted.
# Every node declares LOCAL_SLURM_GPUS GPUs as generic resources (gres/gpu), backed by
# device files the script creates (there is no GPU here: Slurm only hands them out).
# Env: LOCAL_SLURM_NODES (default 2), LOCAL_SLURM_SPARE (nodes only the "wide" partition has, default 2),
#      LOCAL_SLURM_CPUS (per node, default 2),
#      LOCAL_SLURM_MEM (MB per node, default 4000), LOCAL_SLURM_GPUS (per node, default 2),
#      DISPATCH_TEST_STATE.
# See docs/dev/test-clusters.md.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/lib.sh"
LOG_TAG=local-up
need_root
T0=$SECONDS

NODES=${LOCAL_SLURM_NODES:-2}
SPARE=${LOCAL_SLURM_SPARE:-2}
CPUS=${LOCAL_SLURM_CPUS:-2}
MEM=${LOCAL_SLURM_MEM:-4000}
GPUS=${LOCAL_SLURM_GPUS:-2}
case "$NODES$SPARE$CPUS$MEM$GPUS" in *[!0-9]*) die "LOCAL_SLURM_NODES/SPARE/CPUS/MEM/GPUS must be integers" ;; esac
# n1..n$NODES serve every partition; the spare nodes after them only "wide", so that a job there can be sent
# away from the nodes it was blamed on while the other partitions keep the shape the tests expect
ALL=$((NODES + SPARE))
CLUSTER=localcluster
ACCOUNT=testacct
DBPASS=slurmdbpass
ETC=/etc/slurm
RUN=/run/slurm
LOGDIR=/var/log/slurm
CTLD_PORT=6817 SLURMD_PORT=6818 DBD_PORT=6819 NODE_PORT0=6821   # n1=6821, n2=6822, ...
MINJOBAGE=15 KILLWAIT=5 SLURMDTIMEOUT=10 CRED_EXPIRE=10

# the Slurm commands below must talk to this cluster, whatever the caller's environment says
while read -r v; do unset "$v"; done < <(compgen -e | grep '^SLURM_' || true)
export SLURM_CONF=$ETC/slurm.conf

mkdir -p "$DISPATCH_TEST_STATE"
# fd 8 holds the lock; every daemon is started with "8>&-" so that it does not keep it
exec 8>"$DISPATCH_TEST_STATE/local-up.lock"
flock -w 300 8 || die "another local-up.sh is still running"

# ------------------------------------------------------------------ 1. packages
PKGS=(slurmctld slurmd slurm-client slurmdbd slurm-wlm-basic-plugins munge mariadb-server)
host_apt_install "${PKGS[@]}"
VER=$(dpkg-query -W -f='${Version}' slurmctld)
case $VER in 22.05.*) ;; *) die "expected Debian's Slurm 22.05, found slurmctld $VER" ;; esac

# ------------------------------------------------------------------ 2. configuration
install -d -m 755 "$ETC" /var/spool/slurmd
install -d -o slurm -g slurm -m 755 "$RUN" "$LOGDIR" /var/spool/slurmctld
install -d -o munge -g munge -m 755 /run/munge
if [ ! -s /etc/munge/munge.key ]; then
  log "creating /etc/munge/munge.key"
  (umask 077; dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none)
fi
chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key

# task/cgroup (memory limits, hence OUT_OF_MEMORY) only where a cgroup memory controller
# is usable: cgroup v1 with a writable memory hierarchy (this machine), or cgroup v2 with
# the memory controller. Otherwise no task plugin and no memory enforcement.
TASK_PLUGIN=task/none
MEMORY_ENFORCED=false
if [ -d /sys/fs/cgroup/memory ] && mkdir -p /sys/fs/cgroup/memory/.dispatch_probe 2>/dev/null; then
  rmdir /sys/fs/cgroup/memory/.dispatch_probe
  TASK_PLUGIN=task/cgroup MEMORY_ENFORCED=true
elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  TASK_PLUGIN=task/cgroup MEMORY_ENFORCED=true
fi

changed_ctld=0 changed_dbd=0
write_if_changed "$ETC/cgroup.conf" 644 <<'EOF2' && changed_ctld=1 || true
# written by scripts/slurm/local-up.sh
CgroupPlugin=autodetect
CgroupAutomount=yes
ConstrainCores=no
ConstrainRAMSpace=yes
ConstrainSwapSpace=no
EOF2

# fake GPU devices: node n<i>'s GPUs are $GPUDEV/n<i>/nvidia<k>, character devices with NVIDIA's major number
# (Slurm refuses regular files; it only stats them, and without a driver nothing can open them)
GPUDEV=$DISPATCH_TEST_STATE/fake-gpus
for ((i = 1; i <= ALL; i++)); do
  install -d -m 755 "$GPUDEV/n$i"
  for ((g = 0; g < GPUS; g++)); do
    f=$GPUDEV/n$i/nvidia$g
    [ -c "$f" ] || { rm -f -- "$f"; mknod -m 600 "$f" c 195 "$g" || die "mknod $f failed"; changed_ctld=1; }
  done
done
gres=$(
  echo "# written by scripts/slurm/local-up.sh: fake GPUs (device files) for the dispatch tests"
  for ((i = 1; i <= ALL; i++)); do
    if [ "$GPUS" -gt 0 ]; then echo "NodeName=n$i Name=gpu File=$GPUDEV/n$i/nvidia[0-$((GPUS - 1))]"; fi
  done
)
write_if_changed "$ETC/gres.conf" 644 <<<"$gres" && changed_ctld=1 || true
NODEGRES=""
GRESTYPES=""
if [ "$GPUS" -gt 0 ]; then NODEGRES=" Gres=gpu:$GPUS"; GRESTYPES="GresTypes=gpu"; fi

NODELIST="n[1-$NODES]"
conf=$(
  cat <<EOF2
# written by scripts/slurm/local-up.sh: the dispatch "local" test cluster (Slurm 22.05)
ClusterName=$CLUSTER
SlurmctldHost=localhost
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
# cred_expire is also the delay before a requeued job may start again (default 120 s)
AuthInfo=cred_expire=$CRED_EXPIRE
MpiDefault=none
MailProg=/bin/true
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=$TASK_PLUGIN
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=500
SlurmdParameters=config_overrides
ReturnToService=1
MinJobAge=$MINJOBAGE
KillWait=$KILLWAIT
SlurmdTimeout=$SLURMDTIMEOUT
SlurmctldTimeout=10
MessageTimeout=10
InactiveLimit=0
Waittime=0
OverTimeLimit=0
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=5
MaxJobCount=20000
JobRequeue=0
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
AccountingStorageEnforce=associations
JobCompType=jobcomp/none
$GRESTYPES
EOF2
  for ((i = 1; i <= ALL; i++)); do
    echo "NodeName=n$i NodeHostname=n$i NodeAddr=127.0.0.1 Port=$((NODE_PORT0 + i - 1)) CPUs=$CPUS Sockets=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM$NODEGRES State=UNKNOWN"
  done
  echo "PartitionName=normal Nodes=$NODELIST Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE"
  echo "PartitionName=high Nodes=$NODELIST Default=NO MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF"
  echo "PartitionName=wide Nodes=n[1-$ALL] Default=NO MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE"
)
write_if_changed "$ETC/slurm.conf" 644 <<<"$conf" && changed_ctld=1 || true

write_if_changed "$ETC/slurmdbd.conf" 600 <<EOF2 && changed_dbd=1 || true
# written by scripts/slurm/local-up.sh
AuthType=auth/munge
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=slurm
DebugLevel=info
LogFile=$LOGDIR/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=$DBPASS
EOF2
chown slurm:slurm "$ETC/slurmdbd.conf"

# ------------------------------------------------------------------ 3. daemons
# MariaDB (shared with other users of this machine: started if down, never restarted)
if ! mysqladmin --connect-timeout=2 ping >/dev/null 2>&1; then
  log "starting mariadbd"
  install -d -o mysql -g mysql -m 755 /run/mysqld
  if [ ! -d /var/lib/mysql/mysql ]; then
    LOGHINT=$DISPATCH_TEST_STATE/mariadb-install.log
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql >"$LOGHINT" 2>&1 || die "mariadb-install-db failed"
  fi
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql 8>&-
  LOGHINT=""
  waitfor 60 "mariadbd (mysqladmin ping)" mysqladmin --connect-timeout=2 ping
fi
mysql -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
          CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DBPASS';
          GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';" \
  || die "could not prepare the slurm_acct_db database in MariaDB"

# munge
if ! pidfile_alive /run/munge/munged.pid munged /; then
  log "starting munged"
  rm -f /run/munge/munged.pid
  runuser -u munge -- /usr/sbin/munged --force 8>&- </dev/null >>"$LOGDIR/start-munged.log" 2>&1 \
    || { LOGHINT=$LOGDIR/start-munged.log; die "munged did not start"; }
  waitfor 20 "munged" bash -c 'munge -n </dev/null | unmunge'
fi

# config changes: restart what reads the changed files (22.05 cannot add nodes by reconfigure)
if [ "$changed_dbd" = 1 ]; then stop_pidfile "$RUN/slurmdbd.pid" slurmdbd /; fi
if [ "$changed_ctld" = 1 ] && pidfile_alive "$RUN/slurmctld.pid" slurmctld /; then
  log "slurm.conf/cgroup.conf changed: restarting slurmctld and the slurmds"
  for f in "$RUN"/slurmd-*.pid; do [ -e "$f" ] && stop_pidfile "$f" slurmd / & done
  wait
  stop_pidfile "$RUN/slurmctld.pid" slurmctld /
fi

# slurmdbd
if ! pidfile_alive "$RUN/slurmdbd.pid" slurmdbd /; then
  log "starting slurmdbd (port $DBD_PORT)"
  port_free "$DBD_PORT" slurmdbd
  LOGHINT=$LOGDIR/slurmdbd.log
  /usr/sbin/slurmdbd 8>&- </dev/null >>"$LOGDIR/start-slurmdbd.log" 2>&1 || die "slurmdbd did not start"
  waitfor 60 "slurmdbd" sacctmgr -n list cluster
fi
LOGHINT=$LOGDIR/slurmdbd.log
acct_new=0
if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
  sacctmgr -i add cluster "$CLUSTER" >/dev/null || die "sacctmgr add cluster failed"
  acct_new=1
fi
sacctmgr -n -P list account format=account | grep -qx "$ACCOUNT" \
  || sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description=dispatch-tests Organization=dispatch >/dev/null
sacctmgr -n -P list assoc cluster="$CLUSTER" account="$ACCOUNT" user=root format=user | grep -qx root \
  || sacctmgr -i add user root Account="$ACCOUNT" DefaultAccount="$ACCOUNT" Cluster="$CLUSTER" >/dev/null
# a new accounting database gives the cluster a new id: forget the one slurmctld saved
if [ "$acct_new" = 1 ] && ! pidfile_alive "$RUN/slurmctld.pid" slurmctld /; then
  rm -f /var/spool/slurmctld/clustername
fi

# slurmctld
if ! pidfile_alive "$RUN/slurmctld.pid" slurmctld /; then
  log "starting slurmctld (port $CTLD_PORT)"
  port_free "$CTLD_PORT" slurmctld
  LOGHINT=$LOGDIR/slurmctld.log
  /usr/sbin/slurmctld 8>&- </dev/null >>"$LOGDIR/start-slurmctld.log" 2>&1 || die "slurmctld did not start"
  waitfor 60 "slurmctld" bash -c 'scontrol ping | grep -q "is UP"'
fi

# slurmd, one per node
LOGHINT=""
for ((i = 1; i <= ALL; i++)); do
  if ! pidfile_alive "$RUN/slurmd-n$i.pid" slurmd /; then
    log "starting slurmd -N n$i (port $((NODE_PORT0 + i - 1)))"
    port_free "$((NODE_PORT0 + i - 1))" "slurmd n$i"
    install -d -m 755 "/var/spool/slurmd/n$i"
    /usr/sbin/slurmd -N "n$i" 8>&- </dev/null >>"$LOGDIR/start-slurmd-n$i.log" 2>&1 \
      || { LOGHINT=$LOGDIR/slurmd-n$i.log; die "slurmd n$i did not start"; }
  fi
done

# nodes left DOWN/DRAINED (by a test, or by a slurmd that died) go back to service
for n in $(sinfo -h -N -o '%N %t' | sort -u | awk '$2 ~ /^(down|drain|drng|fail)/ {print $1}'); do
  log "resuming node $n"
  scontrol update NodeName="$n" State=RESUME || true
done
nodes_ready() {
  local ok
  ok=$(sinfo -h -N -o '%N %t' | sort -u | awk '$2 ~ /^(idle|mix|alloc|comp|plnd|resv|maint)[-+]?$/' | wc -l)
  [ "$ok" -eq "$ALL" ]
}
LOGHINT=$LOGDIR/slurmctld.log
waitfor 60 "all $ALL nodes to be up (sinfo -N)" nodes_ready
LOGHINT=""

cat >"$DISPATCH_TEST_STATE/local.env" <<EOF2
SLURM_CONF=$ETC/slurm.conf
LOCAL_VERSION=$(sinfo -V | awk '{print $2}')
LOCAL_NODES=$NODES
LOCAL_SPARE=$SPARE
LOCAL_MEMORY_ENFORCED=$MEMORY_ENFORCED
LOCAL_GPUS_PER_NODE=$GPUS
EOF2
log "local cluster ready: $(sinfo -V), nodes $NODELIST (partition wide: n[1-$ALL]), memory enforced: $MEMORY_ENFORCED, $((SECONDS - T0)) s"

#!/usr/bin/env bash
# chroot-up.sh CLUSTER: build once (debootstrap) or reuse a Debian chroot holding one Slurm
# release, and start in it, idempotently and as root, one test cluster: munged, MariaDB,
# slurmdbd, slurmctld, N slurmd "nodes" node1..nodeN and an sshd on 127.0.0.1 for a
# non-root user (ed25519 key, known_hosts written for StrictHostKeyChecking=yes).
# Called as sid-up.sh / trixie-up.sh. The clusters, which run side by side with the host
# cluster of local-up.sh (ports 68xx, 3306) and share no port, UID or file with it:
#   CLUSTER  suite   Slurm  ssh   slurmctld slurmdbd slurmd  MariaDB user   uids (user, slurm, munge, mysql)
#   sid      sid     26.05  2222  7817      7819     7821..  3307    ada    7800 7830 7831 7832
#   trixie   trixie  24.11  2223  8817      8819     8821..  3308    grace  7900 7930 7931 7932
# Env (PFX = SID or TRIXIE): PFX_SLURM_ROOT (chroot, default /opt/dispatch-slurm-CLUSTER),
#      PFX_SLURM_KEYDIR (host-side ssh files, default /opt/dispatch-slurm-CLUSTER-ssh),
#      PFX_SLURM_NODES (default 2), PFX_SLURM_SPARE (nodes only partition "wide" has, default 2), PFX_SLURM_GPUS (fake GPUs per node, default 2), PFX_SLURM_MIRROR,
#      PFX_SLURM_CGROUP=none, DISPATCH_TEST_STATE.
# The sid chroot also gets Debian's apptainer and a test image (apptainer-up.sh).
# Every node declares PFX_SLURM_GPUS GPUs as generic resources (gres/gpu), backed by character-device files
# the script creates in the chroot (there is no GPU here: Slurm only hands them out), as local-up.sh does.
# See docs/dev/test-clusters.md.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/lib.sh"
C=${1:-}
case $C in
  sid)
    SUITE=sid SERIES=26.05 SSH_PORT=2222 CTLD_PORT=7817 DBD_PORT=7819 DB_PORT=3307 NODE_PORT0=7821
    SUSER=ada SUID=7800 SLURM_ID=7830 MUNGE_ID=7831 MYSQL_ID=7832
    # how long a requeued job is held back: 26.05 reads SchedulerParameters=requeue_delay
    AUTHINFO=socket=/run/munge/munge.socket.2 SCHEDPARAMS=bf_interval=5,requeue_delay=5
    ;;
  trixie)
    SUITE=trixie SERIES=24.11 SSH_PORT=2223 CTLD_PORT=8817 DBD_PORT=8819 DB_PORT=3308 NODE_PORT0=8821
    SUSER=grace SUID=7900 SLURM_ID=7930 MUNGE_ID=7931 MYSQL_ID=7932
    # 24.11 has no requeue_delay: a requeued job is held back for the credential lifetime (cred_expire)
    AUTHINFO=socket=/run/munge/munge.socket.2,cred_expire=10 SCHEDPARAMS=bf_interval=5
    ;;
  *) LOG_TAG=chroot-up die "usage: $0 sid|trixie" ;;
esac
LOG_TAG=$C-up
need_root
T0=$SECONDS
PFX=${C^^}
# env PFX_NAME, or DEFAULT
envor() { local v="${PFX}_SLURM_$1"; printf '%s' "${!v:-$2}"; }
R=$(envor ROOT "/opt/dispatch-slurm-$C")
KEYDIR=$(envor KEYDIR "/opt/dispatch-slurm-$C-ssh")
MIRROR=$(envor MIRROR http://deb.debian.org/debian)
NNODES=$(envor NODES 2)
# node1..node$NNODES serve every partition; the spare nodes after them only "wide", so that a job there can be
# sent away from the nodes it was blamed on while the other partitions keep the shape the tests expect
NSPARE=$(envor SPARE 2)
CGROUP_MODE=$(envor CGROUP auto)
GPUS=$(envor GPUS 2)
case $NNODES in ''|*[!0-9]*) die "${PFX}_SLURM_NODES must be an integer" ;; esac
case $NSPARE in ''|*[!0-9]*) die "${PFX}_SLURM_SPARE must be an integer" ;; esac
case $GPUS in ''|*[!0-9]*) die "${PFX}_SLURM_GPUS must be an integer" ;; esac
CPUS=2 MEM=4000
MINJOBAGE=15 KILLWAIT=5 SLURMDTIMEOUT=10
# Service users get ids the host does not use: Debian pins slurm to 64030 on the host and
# in the chroots alike, so anything on the host acting on "user slurm" would hit all of them.
PKGS=(slurmctld slurmd slurm-client slurmdbd munge mariadb-server openssh-server procps)
NODES=()
for ((i = 1; i <= NNODES + NSPARE; i++)); do NODES+=("node$i"); done

mkdir -p "$DISPATCH_TEST_STATE"
# fd 8 holds the lock; every daemon is started with "8>&-" so that it does not keep it
exec 8>"$DISPATCH_TEST_STATE/$C-up.lock"
flock -w 600 8 || die "another $C-up.sh is still running"

# inr CMD...: run CMD inside the chroot with a clean environment (no host SLURM_* etc.)
inr() {
  chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/root \
    DEBIAN_FRONTEND=noninteractive "$@"
}
# alive PIDFILE-IN-CHROOT COMM: the pid runs COMM and is rooted in our chroot
alive() { pidfile_alive "$R$1" "$2" "$R"; }

# ------------------------------------------------------------------ 1. chroot
command -v ssh-keygen >/dev/null && command -v ssh >/dev/null || host_apt_install openssh-client
if [ ! -f "$R/.dispatch-bootstrapped" ]; then
  if [ -e "$R" ]; then
    grep -q " ${R}[/ ]" /proc/mounts && die "$R is half-built and still has mounts: run $C-down.sh first"
    log "removing half-built $R"
    rm -rf --one-file-system -- "$R"
  fi
  host_apt_install debootstrap
  log "debootstrap --variant=minbase $SUITE $R (log: $DISPATCH_TEST_STATE/$C-debootstrap.log)"
  LOGHINT=$DISPATCH_TEST_STATE/$C-debootstrap.log
  debootstrap --variant=minbase "$SUITE" "$R" "$MIRROR" >"$LOGHINT" 2>&1 || die "debootstrap failed"
  LOGHINT=""
  touch "$R/.dispatch-bootstrapped"
fi

# ------------------------------------------------------------------ 2. mounts
mnt() { # mnt SOURCE TARGET-IN-CHROOT MOUNT-ARGS...
  mountpoint -q "$R$2" || mount "${@:3}" "$1" "$R$2"
}
mnt proc /proc -t proc
mnt /sys /sys --bind
mnt /dev /dev --bind
mnt /dev/pts /dev/pts --bind
mnt /dev/shm /dev/shm --bind
# a private /run: the host's /run/munge, /run/mysqld, /run/slurm stay out of sight
mnt tmpfs /run -t tmpfs -o mode=755
# Memory limits (OUT_OF_MEMORY): on a host with a cgroup v1 memory hierarchy (this machine
# kind), the chroot gets its own sub-hierarchy HOST_MEMCG as its /sys/fs/cgroup/memory, and
# Slurm uses cgroup/v1 + task/cgroup in it; its cgroups (slurm_nodeN/...) never meet the
# host cluster's (/slurm/...). Elsewhere (cgroup v2 hosts): no cgroups, no memory limits.
HOST_MEMCG=/sys/fs/cgroup/memory/dispatch-$C
MEMORY_ENFORCED=false
if [ "$CGROUP_MODE" != none ] && [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ] \
   && mkdir -p "$HOST_MEMCG" 2>/dev/null && [ -f "$HOST_MEMCG/memory.limit_in_bytes" ]; then
  mnt "dispatch-$C-cgroup" /sys/fs/cgroup -t tmpfs -o mode=755,size=1m
  mkdir -p "$R/sys/fs/cgroup/memory"
  mnt "$HOST_MEMCG" /sys/fs/cgroup/memory --bind
  MEMORY_ENFORCED=true
fi

# ------------------------------------------------------------------ 3. packages
printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d"; chmod 755 "$R/usr/sbin/policy-rc.d"
# The archive reachable here may be a frozen copy whose InRelease has an expired Valid-Until.
echo 'Acquire::Check-Valid-Until "false";' >"$R/etc/apt/apt.conf.d/99no-check-valid-until"
echo 'APT::Install-Recommends "false";' >"$R/etc/apt/apt.conf.d/99no-recommends"
[ -s "$R/etc/hosts" ] || printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$(hostname)" >"$R/etc/hosts"

# pin_id NAME ID [HOME SHELL]: system user+group NAME with uid=gid=ID in the chroot; an
# existing one is moved (passwd/group edited directly: usermod refuses while any host
# process has the old uid) and its files in the chroot re-owned.
pin_id() {
  local n=$1 id=$2 home=${3:-/nonexistent} sh=${4:-/usr/sbin/nologin} ou og
  inr getent group "$n" >/dev/null || inr groupadd -g "$id" "$n"
  inr getent passwd "$n" >/dev/null || inr useradd -M -u "$id" -g "$id" -d "$home" -s "$sh" "$n"
  ou=$(inr id -u "$n")
  og=$(inr getent group "$n" | cut -d: -f3)
  if [ "$ou" != "$id" ] || [ "$og" != "$id" ]; then
    log "moving chroot user $n from $ou:$og to $id:$id"
    awk -F: -v OFS=: -v n="$n" -v id="$id" '$1==n{$3=id;$4=id}1' "$R/etc/passwd" >"$R/etc/passwd.new"
    awk -F: -v OFS=: -v n="$n" -v id="$id" '$1==n{$3=id}1' "$R/etc/group" >"$R/etc/group.new"
    chmod 644 "$R/etc/passwd.new" "$R/etc/group.new"
    mv -f "$R/etc/passwd.new" "$R/etc/passwd"
    mv -f "$R/etc/group.new" "$R/etc/group"
    find "$R" -xdev -uid "$ou" -exec chown -h "$id" {} +
    find "$R" -xdev -gid "$og" -exec chgrp -h "$id" {} +
  fi
}
pin_id slurm "$SLURM_ID"; pin_id munge "$MUNGE_ID"; pin_id mysql "$MYSQL_ID"
if ! inr dpkg-query -W "${PKGS[@]}" >/dev/null 2>&1; then
  log "apt-get install ${PKGS[*]} in the chroot (log: $DISPATCH_TEST_STATE/$C-apt.log)"
  LOGHINT=$DISPATCH_TEST_STATE/$C-apt.log
  inr apt-get -o DPkg::Lock::Timeout=600 update -q >"$LOGHINT" 2>&1 || die "apt-get update in the chroot failed"
  inr apt-get -o DPkg::Lock::Timeout=600 install -y -q "${PKGS[@]}" >>"$LOGHINT" 2>&1 \
    || die "apt-get install in the chroot failed"
  inr apt-get clean
  LOGHINT=""
fi
# shellcheck disable=SC2016
VER=$(inr dpkg-query -W -f='${Version}' slurmctld)
case $VER in "$SERIES".*) ;; *) die "expected Slurm $SERIES in the chroot, found $VER" ;; esac

# ------------------------------------------------------------------ 4. users, ssh
pin_id slurm "$SLURM_ID"; pin_id munge "$MUNGE_ID"; pin_id mysql "$MYSQL_ID"
inr getent passwd "$SUSER" >/dev/null || inr useradd -m -u "$SUID" -s /bin/bash "$SUSER"
pin_id "$SUSER" "$SUID" "/home/$SUSER" /bin/bash
# useradd leaves the password "!" (locked); sshd with UsePAM=no refuses a locked account
# even for key logins. "*" means: no password, not locked.
[ "$(inr getent shadow "$SUSER" | cut -d: -f2)" = '*' ] || inr usermod -p '*' "$SUSER"
install -d -m 700 "$KEYDIR"
[ -s "$KEYDIR/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C "$SUSER@dispatch-slurm-$C" -f "$KEYDIR/id_ed25519"
install -d -m 700 -o "$SUID" -g "$SUID" "$R/home/$SUSER/.ssh"
cmp -s "$KEYDIR/id_ed25519.pub" "$R/home/$SUSER/.ssh/authorized_keys" \
  || install -m 600 -o "$SUID" -g "$SUID" "$KEYDIR/id_ed25519.pub" "$R/home/$SUSER/.ssh/authorized_keys"
# The sshd host keys live outside the chroot too, so a rebuilt chroot keeps its identity.
if [ -s "$KEYDIR/hostkeys/ssh_host_ed25519_key" ]; then
  for f in "$KEYDIR"/hostkeys/ssh_host_*; do
    cmp -s "$f" "$R/etc/ssh/${f##*/}" || cp -p "$f" "$R/etc/ssh/"
  done
else
  install -d -m 700 "$KEYDIR/hostkeys"
  cp -p "$R"/etc/ssh/ssh_host_* "$KEYDIR/hostkeys/"
fi
write_if_changed "$KEYDIR/known_hosts" 644 <<EOF2 || true
[127.0.0.1]:$SSH_PORT $(cut -d' ' -f1,2 "$R/etc/ssh/ssh_host_ed25519_key.pub")
EOF2
write_if_changed "$KEYDIR/ssh_config" 644 <<EOF2 || true
# written by scripts/slurm/$C-up.sh. Use: ssh -F $KEYDIR/ssh_config slurm-$C sbatch --version
Host slurm-$C
  HostName 127.0.0.1
  Port $SSH_PORT
  User $SUSER
  IdentityFile $KEYDIR/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $KEYDIR/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  ControlMaster auto
  ControlPath $KEYDIR/cm-%C
  ControlPersist 300
EOF2

# ------------------------------------------------------------------ 5. configuration
[ -s "$R/etc/munge/munge.key" ] || inr mungekey --create --force
inr chown munge:munge /etc/munge/munge.key
chmod 600 "$R/etc/munge/munge.key"

ch_db=0 ch_slurm=0 ch_dbd=0 ch_ssh=0
write_if_changed "$R/etc/mysql/mariadb.conf.d/99-dispatch-$C.cnf" 644 <<EOF2 && ch_db=1 || true
# written by scripts/slurm/$C-up.sh
[mysqld]
port = $DB_PORT
bind-address = 127.0.0.1
socket = /run/mysqld/mysqld.sock
innodb_buffer_pool_size = 256M
innodb_lock_wait_timeout = 900
# MariaDB 11.8 turns this on; slurmdbd 26.05 says it is unsupported
innodb_snapshot_isolation = OFF
[client]
port = $DB_PORT
socket = /run/mysqld/mysqld.sock
EOF2

# fake GPU devices: node<i>'s GPUs are /var/lib/dispatch-fake-gpus/node<i>/nvidia<k> in the chroot, character
# devices with NVIDIA's major number (Slurm refuses regular files; it only stats them, and without a driver
# nothing can open them)
GPUDEV=/var/lib/dispatch-fake-gpus
gres="# written by scripts/slurm/$C-up.sh: fake GPUs (device files) for the dispatch tests"
NODEGRES="" GRESTYPES=""
if [ "$GPUS" -gt 0 ]; then NODEGRES=" Gres=gpu:$GPUS" GRESTYPES="GresTypes=gpu"; fi
for n in "${NODES[@]}"; do
  install -d -m 755 "$R$GPUDEV/$n"
  for ((g = 0; g < GPUS; g++)); do
    f=$R$GPUDEV/$n/nvidia$g
    [ -c "$f" ] || { rm -f -- "$f"; mknod -m 600 "$f" c 195 "$g" || die "mknod $f failed"; ch_slurm=1; }
  done
  if [ "$GPUS" -gt 0 ]; then gres+=$'\n'"NodeName=$n Name=gpu File=$GPUDEV/$n/nvidia[0-$((GPUS - 1))]"; fi
done
write_if_changed "$R/etc/slurm/gres.conf" 644 <<<"$gres" && ch_slurm=1 || true
nodelines=""
for ((i = 0; i < ${#NODES[@]}; i++)); do
  nodelines+="NodeName=${NODES[i]} NodeHostname=${NODES[i]} NodeAddr=127.0.0.1 Port=$((NODE_PORT0 + i)) CPUs=$CPUS Sockets=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM$NODEGRES State=UNKNOWN"$'\n'
done
write_if_changed "$R/etc/slurm/slurm.conf" 644 <<EOF2 && ch_slurm=1 || true
# written by scripts/slurm/$C-up.sh: the dispatch "$C" test cluster (Slurm $SERIES, chroot)
ClusterName=$C
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
AuthInfo=$AUTHINFO
MpiDefault=none
MailProg=/bin/true
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
$( [ "$MEMORY_ENFORCED" = true ] && echo "TaskPlugin=task/cgroup" || echo "# TaskPlugin unset: no task plugin")
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
# requeue_delay: how long a requeued job is held back (default: the credential lifetime,
# 120 s). Read once per slurmctld start.
SchedulerParameters=$SCHEDPARAMS
MaxJobCount=20000
JobRequeue=0
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
$GRESTYPES
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
AccountingStorageEnforce=associations
JobCompType=jobcomp/none
${nodelines}PartitionName=batch Nodes=node[1-$NNODES] Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE
PartitionName=urgent Nodes=node[1-$NNODES] Default=NO MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
PartitionName=wide Nodes=ALL Default=NO MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE
EOF2
# /sys is bind-mounted without its submounts, so without the memory sub-hierarchy above
# /sys/fs/cgroup is empty in the chroot and slurmd refuses to start with the default
# CgroupPlugin=autodetect: then cgroups are disabled altogether.
if [ "$MEMORY_ENFORCED" = true ]; then
  cgroup_conf="# written by scripts/slurm/$C-up.sh: cgroup v1, memory controller only
CgroupPlugin=cgroup/v1
ConstrainCores=no
ConstrainDevices=no
ConstrainRAMSpace=yes
ConstrainSwapSpace=no"
else
  cgroup_conf="# written by scripts/slurm/$C-up.sh: no cgroups (proctrack/linuxproc, no task plugin)
CgroupPlugin=disabled"
fi
write_if_changed "$R/etc/slurm/cgroup.conf" 644 <<<"$cgroup_conf" && ch_slurm=1 || true
write_if_changed "$R/etc/slurm/slurmdbd.conf" 600 <<EOF2 && ch_dbd=1 || true
# written by scripts/slurm/$C-up.sh
AuthType=auth/munge
AuthInfo=socket=/run/munge/munge.socket.2
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=slurm
PidFile=/run/slurm/slurmdbd.pid
LogFile=/var/log/slurm/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm$C
StorageLoc=slurm_acct_db
EOF2
inr chown slurm:slurm /etc/slurm/slurmdbd.conf
inr install -d -o slurm -g slurm /var/spool/slurmctld /var/log/slurm
for n in "${NODES[@]}"; do inr install -d "/var/spool/slurmd/$n"; done
write_if_changed "$R/etc/ssh/sshd_config.d/dispatch-$C.conf" 644 <<EOF2 && ch_ssh=1 || true
# written by scripts/slurm/$C-up.sh
Port $SSH_PORT
ListenAddress 127.0.0.1
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
UsePAM no
PidFile /run/sshd.pid
MaxSessions 64
MaxStartups 64:30:128
EOF2

# ------------------------------------------------------------------ 6. daemons
SLOG=$R/var/log/slurm
if [ "$ch_slurm" = 1 ] && alive /run/slurm/slurmctld.pid slurmctld; then
  log "slurm.conf/cgroup.conf changed: restarting slurmctld and the slurmds"
  for f in "$R"/run/slurm/slurmd-*.pid; do [ -e "$f" ] && stop_pidfile "$f" slurmd "$R" & done
  wait
  stop_pidfile "$R/run/slurm/slurmctld.pid" slurmctld "$R"
fi
[ "$ch_dbd" = 1 ] || [ "$ch_db" = 1 ] && stop_pidfile "$R/run/slurm/slurmdbd.pid" slurmdbd "$R"
[ "$ch_db" = 1 ] && stop_pidfile "$R/run/mysqld/mysqld.pid" mariadbd "$R" 60
[ "$ch_ssh" = 1 ] && stop_pidfile "$R/run/sshd.pid" sshd "$R"
# /run is a tmpfs: recreate the runtime directories every time
inr install -d -o munge -g munge -m 755 /run/munge
inr install -d -o mysql -g mysql -m 755 /run/mysqld
inr install -d -o slurm -g slurm -m 755 /run/slurm
install -d -m 755 "$R/run/sshd"

if ! alive /run/munge/munged.pid munged; then
  log "starting munged"
  inr runuser -u munge -- /usr/sbin/munged 8>&- </dev/null >/dev/null 2>&1 || die "munged did not start"
  waitfor 10 "munged" alive /run/munge/munged.pid munged
fi
inr munge -n </dev/null | inr unmunge >/dev/null || die "munge round trip in the chroot failed"

if ! alive /run/mysqld/mysqld.pid mariadbd; then
  if [ ! -d "$R/var/lib/mysql/mysql" ]; then
    log "initialising the MariaDB datadir"
    LOGHINT=$DISPATCH_TEST_STATE/$C-mariadb-install.log
    inr mariadb-install-db --user=mysql --datadir=/var/lib/mysql --auth-root-authentication-method=socket \
      >"$LOGHINT" 2>&1 || die "mariadb-install-db failed"
  fi
  log "starting mariadbd on 127.0.0.1:$DB_PORT"
  port_free "$DB_PORT" "the chroot's mariadbd"
  LOGHINT=$R/var/log/mysql/error.log
  inr install -d -o mysql -g mysql /var/log/mysql
  inr setsid -f /usr/sbin/mariadbd --user=mysql --pid-file=/run/mysqld/mysqld.pid \
    --log-error=/var/log/mysql/error.log 8>&- </dev/null >/dev/null 2>&1
  waitfor 60 "mariadbd" inr mariadb-admin --socket=/run/mysqld/mysqld.sock ping
fi
# Create the database before slurmdbd's first start: when slurmdbd (26.05 at least) creates it itself,
# libmariadb 3.4 fails the next query with error 5027 and slurmdbd dies.
inr mariadb --socket=/run/mysqld/mysqld.sock -uroot -e "
  CREATE DATABASE IF NOT EXISTS slurm_acct_db;
  CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm$C';
  CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm$C';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" || die "could not prepare slurm_acct_db"

LOGHINT=$SLOG/slurmdbd.log
if ! alive /run/slurm/slurmdbd.pid slurmdbd; then
  log "starting slurmdbd on $DBD_PORT"
  port_free "$DBD_PORT" "the chroot's slurmdbd"
  inr /usr/sbin/slurmdbd 8>&- </dev/null >/dev/null 2>&1 || die "slurmdbd did not start"
  waitfor 60 "slurmdbd" inr sacctmgr -n show cluster
fi
if ! inr sacctmgr -n -P show cluster format=cluster | grep -qx "$C"; then
  log "registering cluster $C, account research, users $SUSER and root"
  inr sacctmgr -i add cluster "$C" >/dev/null || die "sacctmgr add cluster failed"
  # a new database gives the cluster a new id: drop the one slurmctld saved, or it stops
  # with "fatal: CLUSTER ID MISMATCH"
  alive /run/slurm/slurmctld.pid slurmctld || rm -f "$R/var/spool/slurmctld/clustername"
fi
inr sacctmgr -n -P show account format=account | grep -qx research \
  || inr sacctmgr -i add account research Description=dispatch-tests Organization=dispatch >/dev/null
for u in "$SUSER" root; do
  inr sacctmgr -n -P show assoc where user="$u" account=research format=user | grep -qx "$u" \
    || inr sacctmgr -i add user "$u" Account=research DefaultAccount=research >/dev/null
done

LOGHINT=$SLOG/slurmctld.log
if ! alive /run/slurm/slurmctld.pid slurmctld; then
  log "starting slurmctld on $CTLD_PORT"
  port_free "$CTLD_PORT" "the chroot's slurmctld"
  inr /usr/sbin/slurmctld 8>&- </dev/null >/dev/null 2>&1 || die "slurmctld did not start"
  ctld_up() { inr scontrol ping 2>/dev/null | grep -q "is UP"; }
  waitfor 60 "slurmctld" ctld_up
fi
for n in "${NODES[@]}"; do
  if ! alive "/run/slurm/slurmd-$n.pid" slurmd; then
    log "starting slurmd -N $n"
    port_free "$((NODE_PORT0 + ${n#node} - 1))" "the chroot's slurmd $n"
    LOGHINT=$SLOG/slurmd-$n.log
    inr /usr/sbin/slurmd -N "$n" 8>&- </dev/null >/dev/null 2>&1 || die "slurmd $n did not start"
  fi
done
LOGHINT=$SLOG/slurmctld.log
for n in $(inr sinfo -h -N -o '%N %t' | sort -u | awk '$2 ~ /^(down|drain|drng|fail)/ {print $1}'); do
  log "resuming node $n"
  inr scontrol update NodeName="$n" State=RESUME || true
done
nodes_ready() {
  local ok
  ok=$(inr sinfo -h -N -o '%N %t' | sort -u | awk '$2 ~ /^(idle|mix|alloc|comp|plnd|resv|maint)[-+]?$/' | wc -l)
  [ "$ok" -eq "${#NODES[@]}" ]
}
waitfor 60 "all ${#NODES[@]} nodes to be up (sinfo -N)" nodes_ready

LOGHINT=""
if ! alive /run/sshd.pid sshd; then
  log "starting sshd on 127.0.0.1:$SSH_PORT"
  port_free "$SSH_PORT" "the chroot's sshd"
  inr /usr/sbin/sshd 8>&- </dev/null >/dev/null 2>&1 || die "sshd did not start"
  waitfor 10 "sshd" alive /run/sshd.pid sshd
fi

# ------------------------------------------------------------------ 7. Apptainer (sid only)
# Debian's apptainer and the test image (apptainer-up.sh; about a second when both are there)
if [ "$C" = sid ]; then "$HERE/apptainer-up.sh" "$C" 8>&-; fi

# ------------------------------------------------------------------ 8. end-to-end check
SSH_OPTS=(-p "$SSH_PORT" -i "$KEYDIR/id_ed25519" -o IdentitiesOnly=yes -o BatchMode=yes
  -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$KEYDIR/known_hosts" -o GlobalKnownHostsFile=/dev/null
  -o ConnectTimeout=10)
out=$(ssh "${SSH_OPTS[@]}" "$SUSER@127.0.0.1" sbatch --version 8>&- 2>&1) \
  || die "ssh to $SUSER@127.0.0.1:$SSH_PORT failed: $out"
case $out in "slurm $SERIES"* | "slurm-wlm $SERIES"*) ;; *) die "unexpected 'sbatch --version' over ssh: $out" ;; esac

cat >"$DISPATCH_TEST_STATE/$C.env" <<EOF2
${PFX}_VERSION=${out##* }
${PFX}_ROOT=$R
${PFX}_KEYDIR=$KEYDIR
${PFX}_NODES=$NNODES
${PFX}_SPARE=$NSPARE
${PFX}_MEMORY_ENFORCED=$MEMORY_ENFORCED
${PFX}_GPUS_PER_NODE=$GPUS
${PFX}_SSH_PORT=$SSH_PORT
${PFX}_USER=$SUSER
EOF2
log "$C cluster ready: $out over ssh://$SUSER@127.0.0.1:$SSH_PORT, nodes ${NODES[*]} (the last $NSPARE in partition wide only), memory enforced: $MEMORY_ENFORCED, GPUs per node: $GPUS, $((SECONDS - T0)) s"

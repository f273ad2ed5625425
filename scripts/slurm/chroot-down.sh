#!/usr/bin/env bash
# chroot-down.sh CLUSTER [--purge|--purge-chroot]: stop the chroot test cluster CLUSTER (sid or
# trixie) started by chroot-up.sh (called as sid-down.sh / trixie-down.sh),
# by the PID files inside the chroot (a PID counts only if its process is rooted in the
# chroot), end any other process rooted in the chroot (job steps, ssh sessions), and
# unmount what chroot-up.sh mounted. Never touches the host's Slurm.
#   --purge         also delete the cluster state in the chroot (Slurm spool and logs, the
#                   MariaDB datadir); the chroot itself is kept for a fast restart
#   --purge-chroot  also delete the whole chroot (the next start debootstraps again).
#                   The ssh key and sshd host keys in PFX_SLURM_KEYDIR are kept.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/lib.sh"
C=${1:-}
case $C in sid | trixie) ;; *) LOG_TAG=chroot-down die "usage: $0 sid|trixie [--purge|--purge-chroot]" ;; esac
shift
LOG_TAG=$C-down
need_root
PFX=${C^^}
envor() { local v="${PFX}_SLURM_$1"; printf '%s' "${!v:-$2}"; }
R=$(envor ROOT "/opt/dispatch-slurm-$C")
KEYDIR=$(envor KEYDIR "/opt/dispatch-slurm-$C-ssh")
PURGE=0
case "${1:-}" in
  --purge) PURGE=1 ;;
  --purge-chroot) PURGE=2 ;;
  '') ;;
  *) die "usage: $0 $C [--purge|--purge-chroot]" ;;
esac
[ -d "$R" ] || { log "no $R: nothing to stop"; exit 0; }

ours() { [ -d "/proc/$1" ] && [ "$(readlink "/proc/$1/root" 2>/dev/null || true)" = "$R" ]; }

# close a ControlMaster left by the host-side ssh_config
if [ -f "$KEYDIR/ssh_config" ]; then
  ssh -F "$KEYDIR/ssh_config" -O exit "slurm-$C" >/dev/null 2>&1 || true
fi
stop_pidfile "$R/run/sshd.pid" sshd "$R"
for f in "$R"/run/slurm/slurmd-*.pid; do
  [ -e "$f" ] && stop_pidfile "$f" slurmd "$R" &
done
wait
stop_pidfile "$R/run/slurm/slurmctld.pid" slurmctld "$R"
stop_pidfile "$R/run/slurm/slurmdbd.pid" slurmdbd "$R"
stop_pidfile "$R/run/mysqld/mysqld.pid" mariadbd "$R" 60
stop_pidfile "$R/run/munge/munged.pid" munged "$R"

# anything else rooted in the chroot (slurmstepd, job processes, sshd-session) is ours
left=()
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  ours "$p" && left+=("$p")
done
if [ "${#left[@]}" -gt 0 ]; then
  log "ending leftover chroot processes: ${left[*]}"
  kill -TERM "${left[@]}" 2>/dev/null || true
  sleep 2
  for p in "${left[@]}"; do ours "$p" && kill -KILL "$p" 2>/dev/null || true; done
  sleep 0.5
fi

for m in /opt/dispatch-host/repo /opt/dispatch-host/site /opt/dispatch-host/python \
  /run /dev/shm /dev/pts /dev /sys/fs/cgroup/memory /sys/fs/cgroup /sys /proc; do  # the first three: scripts/training-sid.sh (sid only)
  if mountpoint -q "$R$m"; then
    umount "$R$m" 2>/dev/null || { log "lazy unmount of $R$m"; umount -l "$R$m"; }
  fi
done
if grep -q " ${R}[/ ]" /proc/mounts; then
  grep " ${R}[/ ]" /proc/mounts >&2
  die "something is still mounted under $R"
fi
log "$C cluster stopped and unmounted"

# the chroot's memory cgroups on the host (chroot-up.sh): remove the empty ones, deepest first
HOST_MEMCG=/sys/fs/cgroup/memory/dispatch-$C
if [ "$PURGE" != 0 ] && [ -d "$HOST_MEMCG" ]; then
  find "$HOST_MEMCG" -depth -mindepth 1 -type d -exec rmdir {} \; 2>/dev/null || true
  rmdir "$HOST_MEMCG" 2>/dev/null || log "$HOST_MEMCG is still in use; left in place"
fi

if [ "$PURGE" = 1 ]; then
  rm -rf --one-file-system "$R/var/spool/slurmctld" "$R/var/spool/slurmd" "$R/var/log/slurm" \
    "$R/var/lib/mysql"
  rm -f "$DISPATCH_TEST_STATE/$C.env"
  log "cluster state purged (chroot kept)"
elif [ "$PURGE" = 2 ]; then
  log "deleting $R"
  rm -rf --one-file-system -- "$R"
  rm -f "$DISPATCH_TEST_STATE/$C.env"
fi

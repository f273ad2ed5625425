#!/usr/bin/env bash
# sid-down.sh [--purge|--purge-chroot]: stop the "sid" test cluster started by sid-up.sh,
# by the PID files inside the chroot (a PID counts only if its process is rooted in the
# chroot), end any other process rooted in the chroot (job steps, ssh sessions), and
# unmount what sid-up.sh mounted. Never touches the host's Slurm.
#   --purge         also delete the cluster state in the chroot (Slurm spool and logs, the
#                   MariaDB datadir); the chroot itself is kept for a fast sid-up.sh
#   --purge-chroot  also delete the whole chroot (the next sid-up.sh debootstraps again).
#                   The ssh key and sshd host keys in SID_SLURM_KEYDIR are kept.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/lib.sh"
LOG_TAG=sid-down
need_root
R=${SID_SLURM_ROOT:-/opt/dispatch-slurm-sid}
KEYDIR=${SID_SLURM_KEYDIR:-/opt/dispatch-slurm-sid-ssh}
PURGE=0
case "${1:-}" in
  --purge) PURGE=1 ;;
  --purge-chroot) PURGE=2 ;;
  '') ;;
  *) die "usage: $0 [--purge|--purge-chroot]" ;;
esac
[ -d "$R" ] || { log "no $R: nothing to stop"; exit 0; }

ours() { [ -d "/proc/$1" ] && [ "$(readlink "/proc/$1/root" 2>/dev/null || true)" = "$R" ]; }

# close a ControlMaster left by the host-side ssh_config
if [ -f "$KEYDIR/ssh_config" ]; then
  ssh -F "$KEYDIR/ssh_config" -O exit slurm-sid >/dev/null 2>&1 || true
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
  /run /dev/shm /dev/pts /dev /sys/fs/cgroup/memory /sys/fs/cgroup /sys /proc; do  # the first three: training-sid.sh
  if mountpoint -q "$R$m"; then
    umount "$R$m" 2>/dev/null || { log "lazy unmount of $R$m"; umount -l "$R$m"; }
  fi
done
if grep -q " ${R}[/ ]" /proc/mounts; then
  grep " ${R}[/ ]" /proc/mounts >&2
  die "something is still mounted under $R"
fi
log "sid cluster stopped and unmounted"

# the chroot's memory cgroups on the host (sid-up.sh): remove the empty ones, deepest first
HOST_MEMCG=/sys/fs/cgroup/memory/dispatch-sid
if [ "$PURGE" != 0 ] && [ -d "$HOST_MEMCG" ]; then
  find "$HOST_MEMCG" -depth -mindepth 1 -type d -exec rmdir {} \; 2>/dev/null || true
  rmdir "$HOST_MEMCG" 2>/dev/null || log "$HOST_MEMCG is still in use; left in place"
fi

if [ "$PURGE" = 1 ]; then
  rm -rf --one-file-system "$R/var/spool/slurmctld" "$R/var/spool/slurmd" "$R/var/log/slurm" \
    "$R/var/lib/mysql"
  rm -f "$DISPATCH_TEST_STATE/sid.env"
  log "cluster state purged (chroot kept)"
elif [ "$PURGE" = 2 ]; then
  log "deleting $R"
  rm -rf --one-file-system -- "$R"
  rm -f "$DISPATCH_TEST_STATE/sid.env"
fi

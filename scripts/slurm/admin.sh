#!/usr/bin/env bash
# admin.sh CLUSTER COMMAND [ARGS...]: act as the Slurm administrator (root) on one of the
# test clusters. CLUSTER is "local" (host Slurm 22.05), "sid" (Slurm 26.05 in its chroot) or
# "trixie" (Slurm 24.11 in its chroot).
#
#   admin.sh CLUSTER scontrol|sacctmgr|squeue|sacct|sinfo|scancel|sbatch|sprio|sshare|sdiag|srun ARGS...
#       run that Slurm command as root on the cluster. ARGS are passed as separate argv
#       words, never through a shell, so no quoting is needed beyond the caller's own.
#       e.g. admin.sh sid scontrol update NodeName=node2 State=DOWN Reason="admin test"
#            admin.sh local scontrol hold 42
#   admin.sh CLUSTER stop  slurmctld|slurmdbd|slurmd NODE
#   admin.sh CLUSTER start slurmctld|slurmdbd|slurmd NODE
#   admin.sh CLUSTER restart slurmctld|slurmdbd|slurmd NODE
#       stop/start one daemon by its PID file (start waits until it answers).
#   admin.sh CLUSTER pid slurmctld|slurmdbd|slurmd NODE   print the daemon's PID, if alive
# Run as root. Exit status is the command's.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/lib.sh"
LOG_TAG="admin"
need_root
usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ "$#" -ge 2 ] || usage
CLUSTER=$1 CMD=$2
shift 2
CLEANPATH=/usr/sbin:/usr/bin:/sbin:/bin
case $CLUSTER in
  local)
    ROOT=/ RUNDIR=/run/slurm
    run() { env -i PATH="$CLEANPATH" LANG=C.UTF-8 HOME=/root SLURM_CONF=/etc/slurm/slurm.conf "$@"; }
    ;;
  sid | trixie)
    v="${CLUSTER^^}_SLURM_ROOT"
    ROOT=${!v:-/opt/dispatch-slurm-$CLUSTER} RUNDIR=${!v:-/opt/dispatch-slurm-$CLUSTER}/run/slurm
    [ -x "$ROOT/usr/bin/scontrol" ] || die "no $CLUSTER chroot at $ROOT: run scripts/slurm/up.sh"
    run() { chroot "$ROOT" /usr/bin/env -i PATH="$CLEANPATH" LANG=C.UTF-8 HOME=/root "$@"; }
    ;;
  *) usage ;;
esac

# daemon NAME [NODE] -> sets PIDFILE and START (argv)
daemon() {
  case $1 in
    slurmctld | slurmdbd) PIDFILE=$RUNDIR/$1.pid START=("/usr/sbin/$1") ;;
    slurmd)
      [ -n "${2:-}" ] || die "slurmd needs a node name"
      case $2 in *[!A-Za-z0-9_-]*) die "bad node name: $2" ;; esac
      PIDFILE=$RUNDIR/slurmd-$2.pid START=(/usr/sbin/slurmd -N "$2")
      ;;
    *) die "unknown daemon: $1 (slurmctld, slurmdbd or slurmd NODE)" ;;
  esac
}
stop_daemon() { stop_pidfile "$PIDFILE" "$1" "$ROOT" 30; }
start_daemon() {
  if pidfile_alive "$PIDFILE" "$1" "$ROOT"; then return 0; fi
  run "${START[@]}" </dev/null >/dev/null 2>&1 || die "${START[*]} failed to start"
  waitfor 30 "$1 pid file" pidfile_alive "$PIDFILE" "$1" "$ROOT"
  case $1 in
    slurmctld)
      waitfor 60 "slurmctld to answer" ctld_up
      # then give the slurmds up to 30 s to re-register (state "unknown" or "*" until then)
      local i
      for ((i = 0; i < 60; i++)); do
        run sinfo -h -N -o '%t' | grep -qE '^unk|\*$' || break
        sleep 0.5
      done
      ;;
    slurmdbd) waitfor 60 "slurmdbd to answer" run sacctmgr -n show cluster ;;
  esac
}
ctld_up() { run scontrol ping 2>/dev/null | grep -q "is UP"; }

case $CMD in
  scontrol | sacctmgr | squeue | sacct | sinfo | scancel | sbatch | sprio | sshare | sdiag | srun | sreport)
    run "$CMD" "$@"
    ;;
  stop | start | restart | pid)
    [ "$#" -ge 1 ] || usage
    daemon "$@"
    case $CMD in
      stop) stop_daemon "$1" ;;
      start) start_daemon "$1" ;;
      restart) stop_daemon "$1"; start_daemon "$1" ;;
      pid)
        pidfile_alive "$PIDFILE" "$1" "$ROOT" || die "$1 is not running"
        head -n 1 "$PIDFILE"
        ;;
    esac
    ;;
  *) usage ;;
esac

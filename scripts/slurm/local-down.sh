#!/usr/bin/env bash
# local-down.sh [--purge]: stop the "local" test cluster started by local-up.sh, by its
# PID files only (never by process name: the sid chroot's daemons have the same names).
# MariaDB is shared with other users of the machine and is left running.
#   --purge  also drops the slurm_acct_db database and removes Slurm state, spool and logs.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/lib.sh"
LOG_TAG=local-down
need_root
PURGE=0
case "${1:-}" in
  --purge) PURGE=1 ;;
  '') ;;
  *) die "usage: $0 [--purge]" ;;
esac
RUN=/run/slurm
for f in "$RUN"/slurmd-*.pid; do
  [ -e "$f" ] && stop_pidfile "$f" slurmd / &
done
wait
stop_pidfile "$RUN/slurmctld.pid" slurmctld /
stop_pidfile "$RUN/slurmdbd.pid" slurmdbd /
stop_pidfile /run/munge/munged.pid munged /
if [ "$PURGE" = 1 ]; then
  if mysqladmin --connect-timeout=2 ping >/dev/null 2>&1; then
    mysql -e "DROP DATABASE IF EXISTS slurm_acct_db" || log "could not drop slurm_acct_db"
  fi
  rm -rf /var/spool/slurmctld/* /var/spool/slurmd/* /var/log/slurm/*
  rm -f "$DISPATCH_TEST_STATE/local.env"
  log "state purged"
fi
log "local cluster stopped"

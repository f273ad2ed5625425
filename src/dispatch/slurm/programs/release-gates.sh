#!/bin/bash
# Opens dispatch's gate on the jobs $1 (comma-separated) for a caller whom Slurm forbids to lift an
# administrator's hold, so no squeue first (Slurm itself refuses: "Access/permission denied for job <id>"): one
# scontrol release per job array (<array>_[<tasks>], by the awk program $2: ranges.awk) and one for the plain
# jobs; exit 2 when a release failed (each line of its message on stderr after the expression that named it).
rc=0; set -f
case "$1" in
  *,*) exprs=$(printf '%s\n' "${1//,/$'\n'}" | sort -t_ -k1,1n -k2,2n | awk -F_ "$2");;
  *) exprs=$1;;  # one job: nothing to sort or group
esac
for expr in $exprs; do
  msg=$(scontrol release "$expr" 2>&1) || { rc=2; printf "%s\n" "$msg" | sed "s|^|$expr |" >&2; }
done
exit "$rc"

#!/bin/bash
# The array tasks carrying the markers $4...: M <map>:<line>:<marker> per marker found in a map under $2
# (a regular file of the user's alone, at most map_max bytes, in a directory of the user's alone, written after
# $3 less map_slack seconds; U <why> when the directory is not), then the arrays those maps name as squeue lists
# them (Q <id>|<name>|<submit>, one per task) and, with $1 = 1 (accounting), as sacct does since $3
# (S <id>|<name>|<submit>). After trusted.sh.
# Constants (dispatch.adapterkit.programs): map_slack (dispatch.slurm.pruning.MAP_SLACK), prefix
# (dispatch.slurm.arrays.PREFIX), map_max (dispatch.slurm.trust.MAP_MAX).
map_slack=3600
prefix=dspa-
map_max=1048576
acct=$1; dir=$2; since=$3; shift 3
[ -e "$dir" ] || [ -L "$dir" ] || exit 0
_dsp_trusted "$dir" || { echo "U $dir is not yours alone (owner, mode or a link): not read"; exit 0; }
pats=$(mktemp) || exit 1; trap 'rm -f "$pats"' EXIT; printf "%s\n" "$@" >"$pats"
newer=$((since > map_slack ? since - map_slack : 0))
hits=$(find "$dir" -mindepth 1 -maxdepth 1 -name "$prefix*" -type f -user "$EUID" ! -perm /022 -newermt "@$newer" \
  -size -"$((map_max + 1))"c -exec grep -H -n -x -F -f "$pats" -- {} + 2>/dev/null)
[ -n "$hits" ] || exit 0
printf "%s\n" "$hits" | sed "s/^/M /"
names=$(printf "%s\n" "$hits" | sed "s/:.*//; s|.*/||" | sort -u | paste -sd, -)
q=$(SLURM_TIME_FORMAT=%s squeue -h -r -t all --name="$names" -O "JobArrayID:|,Name:|,SubmitTime:" 2>&1) \
  || { printf "%s\n" "$q" >&2; exit 1; }
[ -z "$q" ] || printf "%s\n" "$q" | sed "s/^/Q /"
[ "$acct" = 1 ] || exit 0
a=$(SLURM_TIME_FORMAT=%s sacct -X -D -P -n -o JobID,JobName,Submit -S "$(date -d @"$since" +%Y-%m-%dT%H:%M:%S)" \
  -E now --name="$names" 2>&1) || { printf "%s\n" "$a" >&2; exit 1; }
[ -z "$a" ] || printf "%s\n" "$a" | sed "s/^/S /"
exit 0

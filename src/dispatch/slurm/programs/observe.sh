#!/bin/bash
# The observation's one call, see dispatch.slurm.progress.OBSERVE: squeue -h -t all -j $1 -O $2, then, when
# $4 asks for progress, the separator line and the trusted reports under the progress directory $3.
# Constants (dispatch.adapterkit.programs): separator (dispatch.slurm.progress.SEPARATOR) and max_report
# (dispatch.adapterkit.progress.MAX_REPORT).
# find's tests, over "." (the progress directory, entered already) and the directories of the jobs to read (depth
# 0; their reports at depth 1): a directory or report is trusted only when it is the reading user's, writable by
# neither group nor others, and no symbolic link (-P never follows one: a link is neither -type d nor -type f); a
# report holds at most max_report bytes. ROOT is printed when the progress directory itself passes. The one awk
# prints "<path> <first line>" per report (a report is one line).
# shellcheck disable=SC2086 # $hits: the job directories, one word each (ids checked by the awk above; set -f)
if [ -z "$4" ]; then SLURM_TIME_FORMAT=%s exec squeue -h -t all -j "$1" -O "$2"; fi
out=$(SLURM_TIME_FORMAT=%s squeue -h -t all -j "$1" -O "$2"); rc=$?
[ -z "$out" ] || printf "%s\n" "$out"
[ "$rc" = 0 ] || exit "$rc"
want=$4
separator=:dispatch-progress:
max_report=4096
cd -- "$3" 2>/dev/null || exit 0
shopt -s nullglob; set -- [0-9]*; set -f
[ "$#" -gt 0 ] || exit 0
hits=$({ printf '%s\n' "$@"; echo /; printf '%s\n' "$out"; } | awk -F'|' -v want="$want" '
  BEGIN { n = split(want, w, ","); for (i = 1; i <= n; i++) W[w[i]] = 1 }
  !listing { if ($0 == "/") listing = 1; else D[$0] = 1; next }
  { id = $1; st = $2; gsub(/ /, "", id); gsub(/ /, "", st) }
  id ~ /^[0-9]+(_[0-9]+)?$/ && (st == "RUNNING" || st == "COMPLETING") && (id in D) && !(id in S) &&
    (want == "*" || id in W) { S[id] = 1; print "./" id }')
[ -n "$hits" ] || exit 0
echo "$separator"
exec find -P . $hits -maxdepth 1 \
  -path . -prune -type d -uid "$EUID" ! -perm /022 -printf 'ROOT\n' -o \
  -type d \( ! -uid "$EUID" -o -perm /022 \) -prune -o \
  -type f -name 'rank-[0-9]*.json' -uid "$EUID" ! -perm /022 -size -"$((max_report + 1))"c \
  -exec awk 'FNR == 1 { print FILENAME " " $0; nextfile }' {} + 2>/dev/null

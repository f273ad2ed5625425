#!/bin/bash
# Write the marker map $3 (the markers $4, one per line; exit 3 and no sbatch when it cannot be written, or
# when the pointers' or the maps' directory is not the user's alone), then sbatch "${@:6}" (the array's
# script on stdin), then each of the $5 tasks' pointer $1.<array>_<task> holding the files' prefix $2.
# sbatch's stdout and status are the call's. After trusted.sh.
# shellcheck disable=SC2015 # every "A && B || C" here means "unless A and B, C", which is what it does
# shellcheck disable=SC2174 # -m is for the deepest directory; the script's umask 077 makes any parent 0700 too
for d in "${1%/*}" "${3%/*}"; do
  if [ -e "$d" ] && ! _dsp_trusted "$d"; then
    printf "%s is not yours alone (owner, mode or a link): fix it or remove it\n" "$d" >&2; exit 3
  fi
done
mkdir -p -m 700 -- "${3%/*}" && [ ! -L "$3" ] && printf "%s\n" "$4" >"$3" || { echo "cannot write the marker map $3" >&2; exit 3; }
out=$(sbatch "${@:6}"); rc=$?
printf "%s\n" "$out"
[ "$rc" = 0 ] || exit "$rc"
jid=${out##*$'\n'}; jid=${jid%%;*}
case "$jid" in ""|*[!0-9]*) exit 0;; esac
t=0
while [ "$t" -lt "$5" ]; do printf "%s\n" "$2" >"$1.${jid}_$t" 2>/dev/null || break; t=$((t+1)); done
exit 0

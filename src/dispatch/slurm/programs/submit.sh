#!/bin/bash
# sbatch "${@:3}" (the batch script on stdin), then the pointer: $2 (the files' prefix) written to
# $1.<job id>. sbatch's stdout and status are the call's; a pointer that could not be written leaves the files
# to be found through squeue/sacct. Exit 3, sbatch not run, when the pointers' directory exists and is not the
# user's alone. After trusted.sh.
if [ -e "${1%/*}" ] && ! _dsp_trusted "${1%/*}"; then
  printf "%s is not yours alone (owner, mode or a link): fix it or remove it\n" "${1%/*}" >&2; exit 3
fi
out=$(sbatch "${@:3}"); rc=$?
printf "%s\n" "$out"
[ "$rc" = 0 ] || exit "$rc"
jid=${out##*$'\n'}; jid=${jid%%;*}
case "$jid" in ""|*[!0-9]*) exit 0;; esac
printf "%s\n" "$2" >"$1.$jid" 2>/dev/null || true

#!/bin/bash
# Opens dispatch's gate on the jobs $1 (comma-separated) with one squeue and one scontrol release per job
# array (<array>_[<tasks>], by the awk program $2: ranges.awk) and one for the plain jobs: prints
# <id> release|open|admin per job squeue knows (admin: an administrator's hold, never lifted); exit 2 when a
# release failed (each line of its message on stderr after the expression that named it).
# shellcheck disable=SC2086 # $rel: the held ids, split into words on purpose (ids only, under set -f)
out=$(squeue -h -r -t all -j "$1" -o "%i %r" 2>&1) || case "$out" in
  *"Invalid job id"*) out="";;
  *) printf "%s\n" "$out" >&2; exit 1;;
esac
rel=""
while read -r id reason; do
  [ -n "$id" ] || continue
  case "$reason" in
    JobHeldAdmin) echo "$id admin";;
    JobHeldUser) rel="$rel $id"; echo "$id release";;
    *) echo "$id open";;
  esac
done <<<"$out"
[ -n "$rel" ] || exit 0
rc=0; set -f
case "$rel" in
  " "*" "*) exprs=$(printf '%s\n' $rel | sort -t_ -k1,1n -k2,2n | awk -F_ "$2");;
  *) exprs=${rel# };;  # one job: nothing to sort or group
esac
for expr in $exprs; do
  msg=$(scontrol release "$expr" 2>&1) || { rc=2; printf "%s\n" "$msg" | sed "s|^|$expr |" >&2; }
done
exit "$rc"

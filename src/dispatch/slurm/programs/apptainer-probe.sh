#!/bin/bash
# bash -c PROBE _ <apptainer> <options>...: stdout missing, or found <path>, the version line, pyxis when
# srun has --container-image; the status is the test container's start's; stderr its errors.
a=$1; shift
p=$(command -v -- "$a") || { printf 'missing\n'; exit 0; }
printf 'found %s\n' "$p"
"$a" --version 2>/dev/null | head -n 1
if srun --help 2>/dev/null | grep -q -e '--container-image'; then printf 'pyxis\n'; fi
d=$(mktemp -d "${TMPDIR:-/tmp}/dispatch-probe.XXXXXX") || exit 70
trap 'rm -rf "$d"' EXIT
b=(--bind /usr)
for x in bin lib lib64 sbin; do
  if [ -L "/$x" ]; then ln -s "$(readlink "/$x")" "$d/$x"; elif [ -d "/$x" ]; then b+=(--bind "/$x"); fi
done
"$a" exec "$@" "${b[@]}" "$d" true >/dev/null

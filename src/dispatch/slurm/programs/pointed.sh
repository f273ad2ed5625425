#!/bin/bash
# The pointer $1 of job $2: NONE; UNTRUSTED <why> when it or its directory is not the user's alone or it is
# too large (pointer_max bytes: dispatch.slurm.trust.POINTER_MAX); else its first line (the files' prefix)
# and then one line <restart>.out per execution that has a stdout file (a regular file, not a link).
# After trusted.sh. Constant (dispatch.adapterkit.programs): pointer_max.
# shellcheck disable=SC2015 # every "A && B || C" here means "unless A and B, C", which is what it does
pointer_max=4096
p=$1
[ -e "$p" ] || [ -L "$p" ] || { echo NONE; exit 0; }
_dsp_trusted "${p%/*}" || { echo "UNTRUSTED its directory is not yours alone (owner, mode, link)"; exit 0; }
[ -f "$p" ] && _dsp_trusted "$p" || { echo "UNTRUSTED it is not a file of yours alone"; exit 0; }
[ "$(stat -c %s -- "$p")" -le "$pointer_max" ] || { echo "UNTRUSTED it is too large"; exit 0; }
base=; IFS= read -r base <"$p"
printf "%s\n" "$base"
case "$base" in /*) ;; *) exit 0;; esac
for f in "$base.$2".*.out; do [ -f "$f" ] && [ ! -L "$f" ] && printf "%s\n" "${f#"$base.$2."}"; done; exit 0

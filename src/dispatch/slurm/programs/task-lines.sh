#!/bin/bash
# Print <job id>:<restart> <srun line> for the executions $2... (each <job id>:<restart>); $1 is the
# pointers' prefix (<output root>/.jobs/<cluster>). At most lines_kept lines per execution. After trusted.sh.
# Constant (dispatch.adapterkit.programs): lines_kept (dispatch.slurm.tasklines.LINES_KEPT).
# shellcheck disable=SC2015 # every "A && B || C" here means "unless A and B, C", which is what it does
lines_kept=64
root=$1; shift
_dsp_trusted "${root%/*}" || exit 0
for one in "$@"; do
  jid=${one%:*} restart=${one##*:} base=
  [ -f "$root.$jid" ] && _dsp_trusted "$root.$jid" || continue
  { IFS= read -r base <"$root.$jid"; } 2>/dev/null
  case "$base" in /*/../*|/*/./*|*/..|*/.) continue;; /*) ;; *) continue;; esac
  f="$base.$jid.$restart.err"
  [ -f "$f" ] && _dsp_trusted "$f" || continue
  grep -a -m "$lines_kept" -E "^srun: error: [^ :]+: tasks? [0-9,-]+: " -- "$f" | while IFS= read -r line; do
    printf "%s %s\n" "$one" "$line"
  done
done
exit 0

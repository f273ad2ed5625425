#!/bin/bash
# bash -c PREPARE _ <pointers' dir> <output dir>...: make the directories (0700), check the pointers' one and
# set it to 0700 (exit 1, naming it, when it is not the user's alone). After trusted.sh.
# shellcheck disable=SC2174 # -m is for the deepest directory; the script's umask 077 makes any parent 0700 too
mkdir -p -m 700 -- "$@" || exit 1
_dsp_trusted "$1" || { printf "%s is not yours alone (owner, mode or a link): fix it or remove it\n" "$1" >&2; exit 1; }
chmod 700 -- "$1"

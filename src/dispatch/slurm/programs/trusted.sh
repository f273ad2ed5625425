#!/bin/bash
# A function for the programs that read back what dispatch wrote (prepended to them, dispatch.slurm.trust):
# _dsp_trusted PATH is true when PATH exists, is no symbolic link, is owned by the script's user and is
# writable by neither group nor others (stat -c %a: the group digit, then the others').
# shellcheck disable=SC2329 # defined here, called by the program it is prepended to
_dsp_trusted() {
  [ -e "$1" ] && [ ! -L "$1" ] && [ -O "$1" ] || return 1
  case "$(stat -c %a -- "$1" 2>/dev/null)" in ""|*[2367]?|*[2367]) return 1;; esac
}

#!/bin/bash
# bash -c SLICE _ PATH OFFSET LIMIT: MISSING, UNTRUSTED, or <start> <size> and then at most LIMIT bytes
# from OFFSET in base64 (a negative OFFSET counts from the end; one stat gives the size, mode and owner).
# shellcheck disable=SC2015 # every "A && B || C" here means "unless A and B, C", which is what it does
f=$1 off=$2 lim=$3
[ -e "$f" ] || [ -L "$f" ] || { echo MISSING; exit 0; }
[ -f "$f" ] && [ ! -L "$f" ] || { echo UNTRUSTED; exit 0; }
read -r size mode uid <<<"$(stat -c "%s %a %u" -- "$f")"; [ -n "$size" ] || exit 1
case "$uid:$mode" in "$EUID":*[2367]?|"$EUID":*[2367]) echo UNTRUSTED; exit 0;; "$EUID":*) ;;
  *) echo UNTRUSTED; exit 0;; esac
if [ "$off" -lt 0 ]; then off=$((size + off)); [ "$off" -ge 0 ] || off=0; fi
echo "$off $size"
tail -c +"$((off + 1))" -- "$f" | head -c "$lim" | base64 -w0

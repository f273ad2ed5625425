#!/bin/bash
# bash -c WHOLE _ PATH START: the file from byte START (1-based) in base64, MISSING or UNTRUSTED.
# After trusted.sh.
# shellcheck disable=SC2015 # every "A && B || C" here means "unless A and B, C", which is what it does
f=$1
[ -e "$f" ] || [ -L "$f" ] || { echo MISSING; exit 0; }
[ -f "$f" ] && _dsp_trusted "$f" || { echo UNTRUSTED; exit 0; }
tail -c +"$2" -- "$f" | base64 -w0

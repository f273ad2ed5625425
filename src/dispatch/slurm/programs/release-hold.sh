#!/bin/bash
# Lift hold $2 from job $1 if it carries it; exit 5 when it carries another (prints its begin time). After
# read-hold.sh, which sets elig and theirs.
# shellcheck disable=SC2154 # elig and theirs are set by read-hold.sh, prepended to this program
if [ "$theirs" = 1 ]; then echo "$elig"; exit 5; fi
if [ "$elig" = "$2" ]; then scontrol update JobId="$1" StartTime=now; fi

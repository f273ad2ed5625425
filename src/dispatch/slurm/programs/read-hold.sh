#!/bin/bash
# The start of hold.sh and release-hold.sh: job $1's state and begin time (st, elig) from squeue, and
# theirs=1 when that begin time is a hold code in [$3, $4) other than $2.
# shellcheck disable=SC2034 # st and theirs are for the program this one is prepended to
line=$(SLURM_TIME_FORMAT=%s squeue -h -r -t all -j "$1" -O "State:|,EligibleTime:|" 2>&1) || { printf "%s\n" "$line" >&2; exit 1; }
IFS="|" read -r st elig _ <<<"$line"
case "$elig" in *[!0-9]*|"") elig=0;; esac
theirs=0; if [ "$elig" -ge "$3" ] && [ "$elig" -lt "$4" ] && [ "$elig" != "$2" ]; then theirs=1; fi

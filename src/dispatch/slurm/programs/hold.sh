#!/bin/bash
# Hold job $1 with begin time $2 (hold codes lie in [$3, $4)): exit 4 not waiting (prints the state), exit 5
# another hold (prints its begin time). After read-hold.sh, which sets st, elig and theirs.
# shellcheck disable=SC2154 # st, elig and theirs are set by read-hold.sh, prepended to this program
case "$st" in PENDING|REQUEUED|REQUEUE_FED|REQUEUE_HOLD|SPECIAL_EXIT) ;; *) echo "$st"; exit 4;; esac
if [ "$theirs" = 1 ]; then echo "$elig"; exit 5; fi
scontrol update JobId="$1" StartTime="uts$2"

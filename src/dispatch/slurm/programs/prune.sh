#!/bin/bash
# bash -c PRUNE _ <pointers' dir> <cluster> <maps' dir> <pointer minutes> <map minutes>: delete the
# pointers <cluster>.* and the maps dspa-* last written more than that many minutes ago (0: none); prints each
# path deleted. After trusted.sh.
jobs=$1 prefix=$2 maps=$3 pmin=$4 mmin=$5
_dsp_trusted "$jobs" || exit 0
if [ "$pmin" -gt 0 ]; then
  find "$jobs" -mindepth 1 -maxdepth 1 -type f -name "$prefix.*" -user "$EUID" -mmin +"$pmin" -print -delete
fi
if [ "$mmin" -gt 0 ] && [ -d "$maps" ] && _dsp_trusted "$maps"; then
  find "$maps" -mindepth 1 -maxdepth 1 -type f -name "dspa-*" -user "$EUID" -mmin +"$mmin" -print -delete
fi
exit 0

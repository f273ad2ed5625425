#!/bin/bash
# sacct's text listing of the jobs $1 (comma-separated), every execution, the fields $2 (22.05, whose JSON lacks
# what the adapter reads), times as epoch seconds.
SLURM_TIME_FORMAT=%s sacct -D -P -n -o "$2" -j "$1"

#!/bin/bash
# Cancel job $1 (exit 1 with squeue's message when squeue does not know it). An array task still inside its
# array's record is first updated alone (a no-op update), which gives it its own record: Slurm cancels such a
# task without a trace otherwise.
r=$(squeue -h -t all -j "$1" -o %T 2>&1) || { printf "%s\n" "$r" >&2; exit 1; }
case "$1" in *_*) scontrol update JobId="$1" Requeue=0 >/dev/null 2>&1;; esac
scancel "$1"

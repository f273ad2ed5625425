#!/bin/bash
# The jobs named $2 (names comma-separated) that sacct has, submitted since $1 (epoch seconds):
# <id>|<name>|<submit epoch seconds> each.
SLURM_TIME_FORMAT=%s sacct -X -D -P -n -o JobIDRaw,JobName,Submit -S "$(date -d @"$1" +%Y-%m-%dT%H:%M:%S)" -E now --name="$2"

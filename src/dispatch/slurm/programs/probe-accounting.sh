#!/bin/bash
# Job $1 as sacct lists it (its id), waiting up to 5 s for it: slurmdbd learns of a new job a moment after
# slurmctld. Exit 1 ("not found" on stderr) when sacct never lists it.
for _ in 1 2 3 4 5 6 7 8 9 10; do o=$(sacct -X -n -P -o JobIDRaw -j "$1" 2>&1); if [ -n "$o" ]; then printf "%s\n" "$o"; exit 0; fi; sleep 0.5; done; echo "not found" >&2; exit 1

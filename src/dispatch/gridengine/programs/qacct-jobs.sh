#!/bin/bash
# qacct -j for each job id $1...: @@job <id> and then qacct's output (stdout and stderr) per job.
for j; do printf "@@job %s\n" "$j"; qacct -j "$j" 2>&1; done

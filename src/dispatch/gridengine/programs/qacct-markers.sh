#!/bin/bash
# qacct -j for each job name $1... one after the other (stdout only; a name qacct does not know prints nothing).
for m; do qacct -j "$m" 2>/dev/null; done

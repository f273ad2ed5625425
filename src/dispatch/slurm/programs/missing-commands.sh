#!/bin/bash
# Each of the commands $1... that is not found in PATH, one a line (none: all are there).
for c in "$@"; do command -v "$c" >/dev/null || echo "$c"; done

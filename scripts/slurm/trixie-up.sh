#!/usr/bin/env bash
# trixie-up.sh: start the "trixie" test cluster (Slurm 24.11 in a Debian 13 chroot, reached
# over SSH as grace@127.0.0.1:2223). See chroot-up.sh and docs/dev/test-clusters.md.
exec "$(dirname "${BASH_SOURCE[0]}")/chroot-up.sh" trixie

#!/usr/bin/env bash
# sid-up.sh: start the "sid" test cluster (Slurm 26.05 in a Debian sid chroot, reached over
# SSH as ada@127.0.0.1:2222). See chroot-up.sh and docs/dev/test-clusters.md.
exec "$(dirname "${BASH_SOURCE[0]}")/chroot-up.sh" sid

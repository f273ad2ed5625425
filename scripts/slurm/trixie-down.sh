#!/usr/bin/env bash
# trixie-down.sh [--purge|--purge-chroot]: stop the "trixie" test cluster. See chroot-down.sh.
exec "$(dirname "${BASH_SOURCE[0]}")/chroot-down.sh" trixie "$@"

#!/usr/bin/env bash
# sid-down.sh [--purge|--purge-chroot]: stop the "sid" test cluster. See chroot-down.sh.
exec "$(dirname "${BASH_SOURCE[0]}")/chroot-down.sh" sid "$@"

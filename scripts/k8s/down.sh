#!/usr/bin/env bash
# down.sh: stop the apiextensions-apiserver and etcd that up.sh started (by their pid files, never by name).
# --purge also removes the etcd data, the certificates and k8s.json (the build chroot and binaries stay; remove
# /opt/dispatch-k8s-build and /opt/dispatch-k8s by hand to rebuild from nothing).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/../slurm/lib.sh"
LOG_TAG=k8s-down
need_root
S=$DISPATCH_TEST_STATE/k8s
[ -d "$S" ] || exit 0
stop_pidfile "$S/apiserver.pid" dispatch-crd-ap / 20
stop_pidfile "$S/etcd.pid" etcd / 20
if [ "${1:-}" = --purge ]; then
  log "removing $S"
  rm -rf --one-file-system -- "$S"
fi

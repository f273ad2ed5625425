#!/usr/bin/env bash
# controlplane-down.sh: stop what controlplane-up.sh started (by its pid files, never by name), the
# controllers first and etcd last. --purge also removes the state (etcd data, certificates,
# control-plane.json); the binaries and Go caches under /opt/dispatch-k8s-cp stay.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/../slurm/lib.sh"
LOG_TAG=k8s-cp-down
need_root
S=$DISPATCH_TEST_STATE/k8s/cp
[ -d "$S" ] || exit 0
rm -f -- "$DISPATCH_TEST_STATE/k8s/control-plane.json"
for n in trainer:trainer-control kueue:kueue jobset:jobset kwok:kwok kube-scheduler:kube-scheduler \
  kube-controller-manager:kube-controller kube-apiserver:kube-apiserver etcd:etcd; do
  stop_pidfile "$S/${n%%:*}.pid" "${n#*:}" / 20
done
if [ "${1:-}" = --purge ]; then
  log "removing $S"
  rm -rf --one-file-system -- "$S"
fi

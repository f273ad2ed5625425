#!/usr/bin/env bash
# nodes-down.sh: stop what nodes-up.sh started (by its pid files, never by name): each real node's pods are deleted
# through the API (while the control plane answers) so its kubelet tears their sandboxes and networks down, then
# the kubelet, any container left (killed through its containerd) and the containerd; the Node objects are
# deleted; then CoreDNS, and the real nodes' entries in control-plane.json. --purge also removes the state
# (containerd roots, images, certificates), the kubelets' root mounts, their cgroups and the bridge nodes-up.sh
# made. The binaries and the packages stay.
# Env: DISPATCH_TEST_STATE, K8S_NODES_BRIDGE (dispatch-k8s0), K8S_CP_PORT_BASE (17000).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/../slurm/lib.sh"
LOG_TAG=k8s-nodes-down
need_root
S=$DISPATCH_TEST_STATE/k8s/nodes
KC=$DISPATCH_TEST_STATE/k8s/cp/admin.kubeconfig
BRIDGE=${K8S_NODES_BRIDGE:-dispatch-k8s0}
P=${K8S_CP_PORT_BASE:-17000}  # in the cgroups' names, as nodes-up.sh names them
[ -d "$S" ] || exit 0
kc() { timeout 30 kubectl --kubeconfig "$KC" --request-timeout 10s "$@"; }
no_tasks() { [ -z "$(ctr --address "$1/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null)" ]; }

for D in "$S"/real-*; do
  [ -d "$D" ] || continue
  NAME=${D##*/}
  if pidfile_alive "$D/kubelet.pid" kubelet / && kc get node "$NAME" >/dev/null 2>&1; then
    log "deleting the pods of $NAME"
    kc delete pods --all-namespaces --field-selector "spec.nodeName=$NAME" --grace-period 1 --wait=false \
      >/dev/null 2>&1 || true
    for ((i = 0; i < 150; i++)); do no_tasks "$D" && break; sleep 0.2; done
  fi
  stop_pidfile "$D/kubelet.pid" kubelet / 20
  if pidfile_alive "$D/containerd.pid" containerd /; then
    for t in $(ctr --address "$D/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$D/containerd.sock" -n k8s.io tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
    done
    for ((i = 0; i < 50; i++)); do no_tasks "$D" && break; sleep 0.2; done
  fi
  stop_pidfile "$D/containerd.pid" containerd / 20
  kc delete node "$NAME" --wait=false >/dev/null 2>&1 || true
done

stop_pidfile "$S/coredns.pid" coredns / 10
JSON=$DISPATCH_TEST_STATE/k8s/control-plane.json
if [ -s "$JSON" ]; then  # under controlplane-up.sh's lock: it writes the file whole
  (
    flock -w 600 7 || die "controlplane-up.sh holds its lock"
    python3 - "$JSON" <<'EOP'
import json, sys
doc = json.load(open(sys.argv[1]))
for key in ("real_nodes", "real_images", "real_network", "cluster_dns"):
    doc.pop(key, None)
with open(sys.argv[1] + ".new", "w") as f:
    json.dump(doc, f, indent=2)
EOP
    mv -f "$JSON.new" "$JSON"
  ) 7>"$DISPATCH_TEST_STATE/k8s/cp/up.lock"
fi

if [ "${1:-}" = --purge ]; then
  for D in "$S"/real-*; do
    [ -d "$D" ] || continue
    NAME=${D##*/}
    # volumes the kubelet mounted under its root, then the root's own bind mount
    while mountpoint -q "$D/kubelet" || grep -q " $D/kubelet/" /proc/self/mounts; do
      umount -R "$D/kubelet" 2>/dev/null || umount -l "$D/kubelet" 2>/dev/null || break
    done
    # overlay snapshots containerd left mounted
    { grep -o " $D/containerd/[^ ]*" /proc/self/mounts || true; } | sort -r | while read -r m; do umount "$m" || true; done
    for h in /sys/fs/cgroup/*; do
      [ -d "$h/dispatch-k8s$P-$NAME" ] || continue
      find "$h/dispatch-k8s$P-$NAME" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    done
  done
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    log "removing the bridge $BRIDGE"
    ip link del "$BRIDGE"
  fi
  log "removing $S"
  rm -rf --one-file-system -- "$S"
fi

# shellcheck shell=bash
# Shared by controlplane-build.sh and controlplane-up.sh. Source it; do not run it.
# The versions of the real Kubernetes control plane and controllers, built from the Go
# module proxy (one Go module: scripts/k8s/controlplane/go.mod pins them all).
# See docs/dev/k8s-control-plane.md.

CP_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/controlplane
CP_ROOT=${K8S_CP_ROOT:-/opt/dispatch-k8s-cp}

KUBE_VERSION=v1.36.3     # k8s.io/kubernetes; every k8s.io/* staging module at v0.36.3
ETCD_VERSION=v3.6.16     # go.etcd.io/etcd/server/v3
KWOK_VERSION=v0.8.0      # sigs.k8s.io/kwok
JOBSET_VERSION=v0.12.0   # sigs.k8s.io/jobset
KUEUE_VERSION=v0.19.0    # sigs.k8s.io/kueue (v0.20.x is refused by the module proxy)
TRAINER_VERSION=v2.3.0   # github.com/kubeflow/trainer/v2

# name -> Go package (main) built from the module graph of scripts/k8s/controlplane/go.mod
declare -A CP_PKG=(
  [etcd]=dispatch.dev/k8scontrolplane/etcd
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kwok]=sigs.k8s.io/kwok/cmd/kwok
  [jobset]=sigs.k8s.io/jobset
  [kueue]=sigs.k8s.io/kueue/cmd/kueue
  [trainer-controller-manager]=github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager
  [kubelet]=k8s.io/kubernetes/cmd/kubelet
)
# name -> the version it reports
declare -A CP_VERSION=(
  [etcd]=$ETCD_VERSION [kube-apiserver]=$KUBE_VERSION [kube-controller-manager]=$KUBE_VERSION
  [kube-scheduler]=$KUBE_VERSION [kwok]=$KWOK_VERSION [jobset]=$JOBSET_VERSION
  [kueue]=$KUEUE_VERSION [trainer-controller-manager]=$TRAINER_VERSION [kubelet]=$KUBE_VERSION
)
CP_CORE=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
CP_CONTROLLERS=(jobset kueue trainer-controller-manager)
# The real nodes' kubelet (scripts/k8s/nodes-up.sh): the same module graph, so it shares the build cache, and a
# package that k8s.io/kubernetes already holds, so go.mod and go.sum need no line for it.
CP_NODES=(kubelet)

# The binaries live in a directory keyed by the versions: a hash of the module pins (go.mod,
# go.sum), etcd's own main and CP_BUILD_FLAGS_VERSION (bump it when the go build flags in
# controlplane-build.sh change). Another pin builds into a fresh directory.
CP_BUILD_FLAGS_VERSION=1
cp_key() {
  { cat "$CP_SRC/go.mod" "$CP_SRC/go.sum" "$CP_SRC"/etcd/main.go; echo "$CP_BUILD_FLAGS_VERSION"; } \
    | sha256sum | cut -c1-12
}
cp_bin() { printf '%s/bin/%s-%s\n' "$CP_ROOT" "$KUBE_VERSION" "$(cp_key)"; }

# The module cache of the build: the controllers' CRDs, webhooks and default runtimes are
# read from there (the same module versions that were compiled).
CP_GOMODCACHE=$CP_ROOT/gomod
cp_module_dir() { # MODULE VERSION -> directory of that module's source in the module cache
  local m=$1 v=$2 esc
  # the module cache escapes upper-case letters as !lower
  esc=$(printf '%s' "$m" | sed -E 's/([A-Z])/!\L\1/g')
  printf '%s/%s@%s\n' "$CP_GOMODCACHE" "$esc" "$v"
}

#!/usr/bin/env bash
# controlplane-build.sh: build (once, cached) the real Kubernetes control plane and the
# real JobSet, Kueue and Kubeflow Trainer controllers from the Go module proxy:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok,
#   jobset, kueue, trainer-controller-manager
# into $(cp_bin) = /opt/dispatch-k8s-cp/bin/<kube version>-<key>/ (key: hash of the pins
# in scripts/k8s/controlplane/go.mod, go.sum and this script). A warm run finds every
# binary there and returns in well under a second. The module and build caches
# (/opt/dispatch-k8s-cp/gomod, /opt/dispatch-k8s-cp/go-build) are kept, so a change of one
# pin recompiles only what changed.
# Usage: controlplane-build.sh [core|controllers|all|nodes]   (default all; core = etcd, the three
#        kube-* binaries and kwok; controllers = JobSet, Kueue, Trainer; nodes = the kubelet of the real
#        nodes, scripts/k8s/nodes-up.sh)
# Env: K8S_CP_ROOT (default /opt/dispatch-k8s-cp), CP_NICE (default 10),
#      DISPATCH_TEST_STATE. See docs/dev/k8s-control-plane.md.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/../slurm/lib.sh"
# shellcheck source=scripts/k8s/controlplane-lib.sh
. "$HERE/controlplane-lib.sh"
LOG_TAG=k8s-cp-build
T0=$SECONDS

what=${1:-all}
case $what in
  core) names=("${CP_CORE[@]}") ;;
  controllers) names=("${CP_CONTROLLERS[@]}") ;;
  all) names=("${CP_CORE[@]}" "${CP_CONTROLLERS[@]}") ;;
  nodes) names=("${CP_NODES[@]}") ;;
  *) die "usage: $0 [core|controllers|all|nodes]" ;;
esac

BIN=$(cp_bin)
mkdir -p "$DISPATCH_TEST_STATE" "$BIN" "$CP_ROOT/go-build" "$CP_GOMODCACHE"
exec 8>"$DISPATCH_TEST_STATE/k8s-cp-build.lock"
flock -w 3600 8 || die "another controlplane-build.sh is still running"

missing=()
for n in "${names[@]}"; do
  [ -x "$BIN/$n" ] || missing+=("$n")
done
if [ "${#missing[@]}" -eq 0 ]; then
  log "binaries up to date in $BIN ($((SECONDS - T0)) s)"
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null || die "no go on PATH (Go >= 1.26 is needed)"
export GOMODCACHE=$CP_GOMODCACHE GOCACHE=$CP_ROOT/go-build GOFLAGS="-buildvcs=false -mod=readonly" \
  CGO_ENABLED=0 GOTOOLCHAIN=${GOTOOLCHAIN:-local}
# Versions as each project's own release build stamps them (so /version, kubectl
# version and the controllers' logs name the release, not v0.0.0-master).
kmaj=${KUBE_VERSION#v}; kmaj=${kmaj%%.*}
kmin=${KUBE_VERSION#v*.}; kmin=${kmin%%.*}
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=$kmaj -X $p.gitMinor=$kmin"
  ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
ld+=" -X sigs.k8s.io/jobset/pkg/version.GitVersion=$JOBSET_VERSION"
ld+=" -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION"

pkgs=()
for n in "${missing[@]}"; do pkgs+=("${CP_PKG[$n]}"); done
out=$CP_ROOT/out.$$
rm -rf -- "$out"; mkdir -p "$out"
suffix=-$what; [ "$what" != all ] || suffix=""
LOGHINT=$DISPATCH_TEST_STATE/k8s-cp-build$suffix.log
log "go build ${missing[*]} (nice ${CP_NICE:-10}; log: $LOGHINT)"
(cd "$CP_SRC" && nice -n "${CP_NICE:-10}" go build -trimpath -ldflags "$ld" -o "$out/" "${pkgs[@]}") \
  >"$LOGHINT" 2>&1 || die "go build failed"
LOGHINT=""
for n in "${missing[@]}"; do
  b=$(basename "${CP_PKG[$n]}")
  [ -x "$out/$b" ] || die "go build produced no $b"
  mv -f "$out/$b" "$BIN/$n"
done
rm -rf -- "$out"
log "built ${missing[*]} into $BIN ($((SECONDS - T0)) s)"
echo "$BIN"

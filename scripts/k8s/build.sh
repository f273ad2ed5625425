#!/usr/bin/env bash
# build.sh: build (once, cached) the upstream apiextensions-apiserver with the project's own
# main (scripts/k8s/apiserver/main.go) from Debian sid's Go source packages, in a sid BUILD
# chroot of its own, and copy the results to the host:
#   $K8S_BIN/dispatch-crd-apiserver  (static Go binary, no cgo)
#   $K8S_BIN/etcd                    (sid's etcd-server)
# The chroot is needed for the build only; the binaries run on the host.
# Idempotent: a warm run checks a stamp (hash of main.go + package versions) and returns.
# Env: K8S_BUILD_ROOT (chroot, default /opt/dispatch-k8s-build), K8S_BIN (default
#      /opt/dispatch-k8s/bin), K8S_MIRROR, DISPATCH_TEST_STATE. See docs/dev/k8s-apiserver.md.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/../slurm/lib.sh"
LOG_TAG=k8s-build
need_root
T0=$SECONDS

R=${K8S_BUILD_ROOT:-/opt/dispatch-k8s-build}
BIN=${K8S_BIN:-/opt/dispatch-k8s/bin}
MIRROR=${K8S_MIRROR:-http://deb.debian.org/debian}
PKGS=(golang-go golang-k8s-apiextensions-apiserver-dev etcd-server ca-certificates)
SRC=$HERE/apiserver
K8S_VERSION=v1.36.4   # the Kubernetes release the -dev packages (0.36.4) were cut from

mkdir -p "$DISPATCH_TEST_STATE" "$BIN"
exec 8>"$DISPATCH_TEST_STATE/k8s-build.lock"
flock -w 900 8 || die "another build.sh is still running"

inr() {
  chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/root \
    DEBIAN_FRONTEND=noninteractive "$@"
}

# A warm run: the binaries exist and were built from this main.go by this build script.
want_stamp=$(cat "$SRC/main.go" "$SRC/build-in-chroot.sh" "$0" | sha256sum | cut -c1-16)
if [ -x "$BIN/dispatch-crd-apiserver" ] && [ -x "$BIN/etcd" ] \
   && [ "$(cat "$BIN/.stamp" 2>/dev/null)" = "$want_stamp" ]; then
  log "binaries up to date in $BIN ($((SECONDS - T0)) s)"
  exit 0
fi

# ------------------------------------------------------------------ 1. chroot
if [ ! -f "$R/.dispatch-bootstrapped" ]; then
  if [ -e "$R" ]; then
    grep -q " ${R}[/ ]" /proc/mounts && die "$R is half-built and still has mounts: unmount $R/proc first"
    log "removing half-built $R"
    rm -rf --one-file-system -- "$R"
  fi
  host_apt_install debootstrap
  log "debootstrap --variant=minbase sid $R (log: $DISPATCH_TEST_STATE/k8s-debootstrap.log)"
  LOGHINT=$DISPATCH_TEST_STATE/k8s-debootstrap.log
  debootstrap --variant=minbase sid "$R" "$MIRROR" >"$LOGHINT" 2>&1 || die "debootstrap failed"
  LOGHINT=""
  touch "$R/.dispatch-bootstrapped"
fi
mountpoint -q "$R/proc" || mount -t proc proc "$R/proc"
trap 'umount "$R/proc" 2>/dev/null || true' EXIT

# ------------------------------------------------------------------ 2. packages
printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d"; chmod 755 "$R/usr/sbin/policy-rc.d"
# The sid archive reachable here is a frozen copy whose InRelease has an expired Valid-Until.
echo 'Acquire::Check-Valid-Until "false";' >"$R/etc/apt/apt.conf.d/99no-check-valid-until"
echo 'APT::Install-Recommends "false";' >"$R/etc/apt/apt.conf.d/99no-recommends"
if ! inr dpkg-query -W "${PKGS[@]}" >/dev/null 2>&1; then
  log "apt-get install ${PKGS[*]} in the chroot (log: $DISPATCH_TEST_STATE/k8s-apt.log)"
  LOGHINT=$DISPATCH_TEST_STATE/k8s-apt.log
  { inr apt-get update -q && inr apt-get install -y -q "${PKGS[@]}"; } >"$LOGHINT" 2>&1 \
    || die "apt-get install in $R failed"
  LOGHINT=""
fi

# ------------------------------------------------------------------ 3. build
mkdir -p "$R/build/src/dispatch.dev/crdapiserver"
cp "$SRC/main.go" "$R/build/src/dispatch.dev/crdapiserver/main.go"
cp "$SRC/build-in-chroot.sh" "$R/build/build-in-chroot.sh"
log "go build (log: $DISPATCH_TEST_STATE/k8s-go-build.log)"
LOGHINT=$DISPATCH_TEST_STATE/k8s-go-build.log
inr env K8S_VERSION="$K8S_VERSION" bash /build/build-in-chroot.sh >"$LOGHINT" 2>&1 || die "go build failed"
LOGHINT=""
install -m 755 "$R/build/out/dispatch-crd-apiserver" "$BIN/dispatch-crd-apiserver.new"
mv -f "$BIN/dispatch-crd-apiserver.new" "$BIN/dispatch-crd-apiserver"
install -m 755 "$R/usr/bin/etcd" "$BIN/etcd.new"
mv -f "$BIN/etcd.new" "$BIN/etcd"
echo "$want_stamp" >"$BIN/.stamp"
log "built $BIN/dispatch-crd-apiserver and copied etcd ($((SECONDS - T0)) s)"

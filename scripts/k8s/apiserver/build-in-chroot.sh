#!/usr/bin/env bash
# Runs INSIDE the build chroot (scripts/k8s/build.sh copies it to /build): an offline GOPATH-mode build of
# /build/src/dispatch.dev/crdapiserver against Debian's Go source packages (/usr/share/gocode).
set -euo pipefail
export GO111MODULE=off GOPATH=/build:/usr/share/gocode GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-mod=mod
export GOCACHE=/build/cache CGO_ENABLED=0
unset GOFLAGS
V=k8s.io/component-base/version
ver=${K8S_VERSION#v}
mkdir -p /build/out
cd /build/src/dispatch.dev/crdapiserver
go version
go build -trimpath -o /build/out/dispatch-crd-apiserver \
  -ldflags "-s -w -X $V.gitVersion=$K8S_VERSION -X $V.gitMajor=${ver%%.*} -X $V.gitMinor=$(echo "$ver" | cut -d. -f2)" .

#!/usr/bin/env bash
# apptainer-up.sh CLUSTER: Apptainer from Debian's own package in a chroot test cluster (chroot-up.sh calls it for
# sid), and the test image the container tests run in, built once from a directory.
#
#   - apt-get install apptainer busybox-static in the chroot (skipped when both are installed);
#   - the test image: a sandbox directory <chroot>/var/lib/dispatch-test-images/busybox holding a static busybox,
#     a handful of applet links and /etc/dispatch-test-image (a file only the image has), built once (a stamp
#     file records the busybox version it was built from; a new busybox rebuilds it);
#   - $DISPATCH_TEST_STATE/CLUSTER-apptainer.json: the image's path as the jobs see it, its marker file and the
#     apptainer version (tests/slurm/test_images_clusters.py reads it).
# Apptainer cannot start a container inside the chroot itself: the kernel refuses user namespaces to a process
# whose root is a chroot (not the root of its mount namespace), and Debian's package has no setuid starter. So
# the cluster answers ContainerImage no, and the tests run the image words in a pivot_root'ed namespace
# (docs/dev/test-clusters.md).
# Idempotent: with both present it costs about a second. Run as root. Env: PFX_SLURM_ROOT as chroot-up.sh.
# See docs/dev/test-clusters.md.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/slurm/lib.sh
. "$HERE/lib.sh"
C=${1:-}
case $C in sid | trixie) ;; *) LOG_TAG=apptainer-up die "usage: $0 sid|trixie" ;; esac
LOG_TAG=$C-apptainer
need_root
T0=$SECONDS
PFX=${C^^}
v="${PFX}_SLURM_ROOT"
R=${!v:-/opt/dispatch-slurm-$C}
[ -x "$R/usr/bin/sbatch" ] || die "no $C chroot at $R: run scripts/slurm/$C-up.sh first"
IMAGE=/var/lib/dispatch-test-images/busybox
MARKER=/etc/dispatch-test-image
PKGS=(apptainer busybox-static)

inr() {
  chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/root \
    DEBIAN_FRONTEND=noninteractive "$@"
}

mkdir -p "$DISPATCH_TEST_STATE"
exec 8>"$DISPATCH_TEST_STATE/$C-apptainer.lock"
flock -w 600 8 || die "another apptainer-up.sh $C is still running"

if ! inr dpkg-query -W "${PKGS[@]}" >/dev/null 2>&1; then
  LOGHINT=$DISPATCH_TEST_STATE/$C-apptainer-apt.log
  log "apt-get install ${PKGS[*]} in the chroot (log: $LOGHINT)"
  : >"$LOGHINT"
  if ! inr apt-get -o DPkg::Lock::Timeout=600 install -y -q "${PKGS[@]}" >>"$LOGHINT" 2>&1; then
    # the package lists may predate the packages: refresh them once
    inr apt-get -o DPkg::Lock::Timeout=600 update -q >>"$LOGHINT" 2>&1 || die "apt-get update in the chroot failed"
    inr apt-get -o DPkg::Lock::Timeout=600 install -y -q "${PKGS[@]}" >>"$LOGHINT" 2>&1 \
      || die "apt-get install ${PKGS[*]} in the chroot failed"
  fi
  inr apt-get clean
  LOGHINT=""
fi
# shellcheck disable=SC2016
APPTAINER=$(inr dpkg-query -W -f='${Version}' apptainer)
# shellcheck disable=SC2016
BUSYBOX=$(inr dpkg-query -W -f='${Version}' busybox-static)

# The image: a root directory made of the chroot's static busybox (no registry is reachable here).
STAMP="busybox-static $BUSYBOX"
if [ "$(cat "$R$IMAGE/.dispatch-built" 2>/dev/null)" != "$STAMP" ]; then
  log "building the test image $IMAGE (sandbox) from busybox-static $BUSYBOX"
  NEW=$R$IMAGE.new
  rm -rf --one-file-system -- "$NEW"
  install -d -m 755 "$NEW"/{bin,dev,etc,home,proc,root,sys,tmp,var/tmp,usr/bin}
  chmod 1777 "$NEW/tmp" "$NEW/var/tmp"
  BB=$(inr sh -c 'command -v busybox') || die "busybox is not in the chroot"
  install -m 755 "$R$BB" "$NEW/bin/busybox"
  for a in sh cat cut echo env hostname id ls od printf pwd sleep sort test tr true false; do
    ln -s busybox "$NEW/bin/$a"
  done
  printf 'dispatch test image (busybox-static %s)\n' "$BUSYBOX" >"$NEW$MARKER"
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$NEW/etc/passwd"
  printf 'root:x:0:\n' >"$NEW/etc/group"
  : >"$NEW/etc/hosts"
  : >"$NEW/etc/resolv.conf"
  printf '%s\n' "$STAMP" >"$NEW/.dispatch-built"
  rm -rf --one-file-system -- "$R$IMAGE"
  mv -- "$NEW" "$R$IMAGE"
fi

python3 - "$DISPATCH_TEST_STATE/$C-apptainer.json" "$IMAGE" "$MARKER" "$APPTAINER" <<'PY'
import json, os, sys

out, image, marker, version = sys.argv[1:]
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump({"image": image, "marker": marker, "apptainer": version}, f, indent=2)
    f.write("\n")
os.chmod(tmp, 0o644)
os.replace(tmp, out)
PY
log "apptainer $APPTAINER in $R, test image $IMAGE ($((SECONDS - T0)) s)"

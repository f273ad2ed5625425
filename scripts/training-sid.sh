#!/usr/bin/env bash
# training-sid.sh [PYTHON]: install torch, lightning and accelerate (training-deps.sh), then make the host's Python,
# torch (and what shares its site-packages) and this checkout usable, read-only, by jobs in the sid chroot (Slurm
# 26.05) for tests/training/test_slurm_sid.py. Run after scripts/slurm/up.sh, as root.
#
#   <chroot>/opt/dispatch-host/python  <- PYTHON's base prefix (sys.base_prefix: interpreter and stdlib)
#   <chroot>/opt/dispatch-host/site    <- the site-packages directory torch is installed in
#   <chroot>/opt/dispatch-host/repo    <- this checkout (examples/train_ddp.py, src/dispatch)
#
# Bind mounts, not copies (about 2 GB). A job then runs /opt/dispatch-host/python/bin/python3 with
# LD_LIBRARY_PATH=/opt/dispatch-host/python/lib (the interpreter's RUNPATH names its host prefix) and
# PYTHONPATH=/opt/dispatch-host/site:/opt/dispatch-host/repo/src. The chroot's own glibc and libstdc++ (sid,
# newer than Debian 12's) serve the host binaries. Idempotent; sid-down.sh unmounts these.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
PY=${1:-python3}
R=${SID_SLURM_ROOT:-/opt/dispatch-slurm-sid}
log() { printf '[training-sid %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root"
[ -x "$R/usr/bin/scontrol" ] || die "no sid chroot at $R: run scripts/slurm/up.sh first"
bash "$HERE/training-deps.sh" "$PY"
BASE=$("$PY" -c 'import sys; print(sys.base_prefix)')
SITE=$("$PY" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))') ||
  die "$PY cannot import torch: run scripts/training-deps.sh $PY"
if ! chroot "$R" /usr/bin/test -e /usr/lib/x86_64-linux-gnu/libffi.so.8; then
  log "apt-get install libffi8 in the chroot (the host's _ctypes, which torch imports, links it)"
  chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q libffi8 >/dev/null || die "apt-get install libffi8 in $R failed"
fi
bind() { # bind SOURCE TARGET-IN-CHROOT
  mkdir -p "$R$2"
  if mountpoint -q "$R$2" && [ "$(stat -c %d:%i "$1")" != "$(stat -c %d:%i "$R$2")" ]; then
    umount -l "$R$2" # mounted from another checkout or interpreter: replace it
  fi
  if ! mountpoint -q "$R$2"; then
    mount --bind "$1" "$R$2"
    mount -o remount,bind,ro "$R$2"
  fi
}
bind "$BASE" /opt/dispatch-host/python
bind "$SITE" /opt/dispatch-host/site
bind "$REPO" /opt/dispatch-host/repo
chroot "$R" /usr/bin/env -i LD_LIBRARY_PATH=/opt/dispatch-host/python/lib \
  PYTHONPATH=/opt/dispatch-host/site:/opt/dispatch-host/repo/src /opt/dispatch-host/python/bin/python3 \
  -c 'import torch, lightning, accelerate, dispatch.job' || die "the host's Python or torch does not run in the chroot"
log "host Python ($BASE), torch ($SITE) and $REPO mounted read-only under $R/opt/dispatch-host"

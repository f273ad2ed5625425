#!/usr/bin/env bash
# Installs what the dashboard's browser tests drive: Debian's chromium and chromium-driver (never a browser
# download). Idempotent: does nothing when both are installed. Serialised with the other set-up scripts' host
# installs by the same lock ($DISPATCH_TEST_STATE/apt.lock), so scripts/test runs it beside them.
# Run as root on Debian 12.
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    chromium --version
    exit 0
fi
STATE=${DISPATCH_TEST_STATE:-/var/lib/dispatch-test}
mkdir -p "$STATE"
export DEBIAN_FRONTEND=noninteractive
(
    flock -w 900 9 || { echo "browser-up.sh: could not get $STATE/apt.lock" >&2; exit 1; }
    apt-get -o DPkg::Lock::Timeout=600 install -y -q chromium chromium-driver >"$STATE/apt-install-browser.log" 2>&1 || {
        apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
        apt-get -o DPkg::Lock::Timeout=600 install -y -q chromium chromium-driver >"$STATE/apt-install-browser.log" 2>&1
    }
) 9>"$STATE/apt.lock"
chromium --version

#!/usr/bin/env bash
# Installs what the Prometheus tests run: Debian's prometheus package, which brings promtool (never a download
# from elsewhere). Only the programs: no service is started (the tests start their own prometheus processes on
# free ports, with data directories under their temporary directories). Idempotent: does nothing when both are
# installed. Serialised with the other set-up scripts' host installs by the same lock
# ($DISPATCH_TEST_STATE/apt.lock), so scripts/test runs it beside them. Run as root on Debian 12.
set -euo pipefail
if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
    prometheus --version 2>&1 | head -n 1
    exit 0
fi
STATE=${DISPATCH_TEST_STATE:-/var/lib/dispatch-test}
mkdir -p "$STATE"
export DEBIAN_FRONTEND=noninteractive
install=(apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends prometheus)
(
    flock -w 900 9 || { echo "prometheus-up.sh: could not get $STATE/apt.lock" >&2; exit 1; }
    "${install[@]}" >"$STATE/apt-install-prometheus.log" 2>&1 || {
        apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
        "${install[@]}" >"$STATE/apt-install-prometheus.log" 2>&1
    }
) 9>"$STATE/apt.lock"
prometheus --version 2>&1 | head -n 1

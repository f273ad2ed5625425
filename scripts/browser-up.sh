#!/usr/bin/env bash
# Installs what the dashboard's browser tests drive: Debian's chromium and chromium-driver (never a browser
# download). Idempotent: does nothing when both are installed. Run as root on Debian 12.
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 || {
    apt-get update -q >/dev/null
    apt-get install -y -q chromium chromium-driver >/dev/null
}
chromium --version

#!/usr/bin/env bash
# Lint and types, the way the test command runs them: `ruff check`, `ruff format --check` (src, tests, bench,
# scripts), `mypy` (strict, as configured in pyproject.toml) and `shellcheck` over the programs the adapters run on
# a login node (src/dispatch/*/programs/*.sh; Debian's package shellcheck, which scripts/test installs). Runs all
# four, prints one line per check ("ok: ..." or its output and "FAILED: ..."), and exits non-zero when any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
rc=0
for check in "ruff check src kubetest tests bench scripts" "ruff format --check src kubetest tests bench scripts" "mypy"; do
    # shellcheck disable=SC2086 # each check is a fixed command line, split on purpose
    if out=$(python3 -m $check 2>&1); then
        printf 'ok: %s (%s)\n' "$check" "$(tail -n 1 <<<"$out")"
    else
        tail -n 60 <<<"$out"
        printf 'FAILED: %s\n' "$check"
        rc=1
    fi
done
programs=(src/dispatch/*/programs/*.sh)
check="shellcheck src/dispatch/*/programs/*.sh"
if ! command -v shellcheck >/dev/null; then
    printf 'FAILED: %s (shellcheck is not installed: apt-get install shellcheck)\n' "$check"
    rc=1
elif out=$(shellcheck --severity=style "${programs[@]}" 2>&1); then
    printf 'ok: %s (%d programs)\n' "$check" "${#programs[@]}"
else
    tail -n 60 <<<"$out"
    printf 'FAILED: %s\n' "$check"
    rc=1
fi
exit "$rc"

#!/usr/bin/env bash
# Lint and types, the way the test command runs them: `ruff check`, `ruff format --check` (src, tests, bench,
# scripts) and `mypy` (strict, as configured in pyproject.toml). Runs all three, prints one line per check
# ("ok: ..." or its output and "FAILED: ..."), and exits non-zero when any failed.
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
exit "$rc"

#!/usr/bin/env bash
# Proves that dispatch works in a FRESH environment with the NEWEST allowed version of every dependency:
# builds a clean virtual environment (no system site packages), installs the project with its dev extra
# using `pip install --upgrade --upgrade-strategy eager` from the package index, and runs the fast tests
# (those that need no daemon) in it. torch, lightning and accelerate are never installed (no dependency of dispatch).
#
#   scripts/fresh-venv.sh [pytest args...]
#
# The venv lives in $DISPATCH_FRESH_VENV (default /tmp/dispatch-fresh-venv-<checkout hash>), rebuilt every run;
# pip's download cache makes a warm run cheap. scripts/test runs this in the background while the clusters
# come up and fails the run if it fails.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${DISPATCH_FRESH_VENV:-/tmp/dispatch-fresh-venv-$(pwd | md5sum | cut -c1-8)}  # one per checkout
# The fast tests: everything here needs no Slurm daemon, no PostgreSQL and no browser.
FAST=(
    tests/test_*.py tests/cli tests/conformance tests/memory tests/records tests/docs
    tests/faults/test_bad_input.py
    tests/slurm/test_settings.py tests/slurm/test_parse_mapping.py tests/slurm/test_scripts.py
    tests/kubeflow/test_settings.py tests/kubeflow/test_render.py tests/kubeflow/test_mapping.py
    tests/kubetest/test_api_basics.py
)

rm -rf "$VENV"
if python3 -c 'import ensurepip' 2>/dev/null; then
    python3 -m venv "$VENV"
    pip=("$VENV/bin/python" -m pip)
else  # Debian without python3-venv: no apt here (the clusters' set-up may hold its lock); drive the venv from outside
    python3 -m venv --without-pip "$VENV"
    pip=(python3 -m pip --python "$VENV/bin/python")
fi
"${pip[@]}" install --quiet --disable-pip-version-check --upgrade --upgrade-strategy eager -e '.[dev]' -e ./kubetest
echo "fresh venv $VENV:" $("${pip[@]}" list --format=freeze --disable-pip-version-check 2>/dev/null \
    | grep -iE '^(click|pyyaml|lightkube|httpx|pydantic|kubeflow.trainer.api|psycopg|pytest|hypothesis)=' | sort)
DISPATCH_DOCS_LEFT_OUT="torch lightning accelerate" exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider \
    -m "not slurm_local and not slurm_sid and not postgres" "${FAST[@]}" "$@"

#!/usr/bin/env bash
# Installs what the training examples and their tests need: torch, CPU build, and numpy (the example hashes its
# parameters through Tensor.numpy(), which torch's wheel does not pull in: "RuntimeError: Numpy is not available"),
# then lightning and accelerate (examples/train_lightning.py, examples/train_accelerate.py, docs/lightning.md). The
# torch pin is exact on purpose: on the project's machines `torch==2.13.0` resolves to a CPU wheel on local disk,
# while any other spec downloads a CUDA build of several GB. lightning and accelerate are installed with every
# package already installed held at its version (a constraints file from `pip list`): they add packages and change
# none, so neither torch nor a dependency of dispatch (click: accelerate's newest huggingface_hub wants a newer one)
# moves under the rest of the suite. Idempotent (a no-op when all of them are importable at their pins).
# Usage: scripts/training-deps.sh [PYTHON]
set -euo pipefail
PY=${1:-python3}
have() { "$PY" -c "$1" 2>/dev/null; }
if ! have 'import numpy, torch, sys; sys.exit(0 if torch.__version__.split("+")[0] == "2.13.0" else 1)'; then
  "$PY" -m pip install --quiet --disable-pip-version-check torch==2.13.0 numpy
fi
if ! have 'import sys, lightning, accelerate; sys.exit(0 if (lightning.__version__, accelerate.__version__) == ("2.6.6", "1.16.0") else 1)'; then
  held=$(mktemp)
  trap 'rm -f "$held"' EXIT
  "$PY" -m pip list --format=freeze --exclude-editable --disable-pip-version-check >"$held"
  "$PY" -m pip install --quiet --disable-pip-version-check -c "$held" lightning==2.6.6 accelerate==1.16.0
fi

#!/usr/bin/env bash
# Installs what examples/train_ddp.py and its tests need: torch, CPU build, and numpy (the example hashes its
# parameters through Tensor.numpy(), which torch's wheel does not pull in: "RuntimeError: Numpy is not available"). The pin is exact on purpose: on the
# project's machines `torch==2.13.0` resolves to a CPU wheel on local disk, while any other spec downloads a CUDA
# build of several GB. Idempotent (a no-op when that torch is importable). Usage: scripts/training-deps.sh [PYTHON]
set -euo pipefail
PY=${1:-python3}
if "$PY" -c 'import numpy, torch, sys; sys.exit(0 if torch.__version__.split("+")[0] == "2.13.0" else 1)' 2>/dev/null; then
  exit 0
fi
"$PY" -m pip install --quiet --disable-pip-version-check torch==2.13.0 numpy

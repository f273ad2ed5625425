"""The CLI decodes records that carry an adapter's extension kind before it has opened that adapter's cluster
(``dispatch status`` of a Kubeflow job reads its record, with ``kubeflow.RuntimeRef``, from the store only)."""

from __future__ import annotations

import subprocess
import sys


def test_the_cli_decodes_an_adapter_kind_before_it_opens_a_cluster() -> None:
    code = (
        "import dispatch.cli.main\n"
        "from dispatch.extensions import extension_from_json\n"
        "print(type(extension_from_json({'kind': 'kubeflow.RuntimeRef', 'name': 'torch'})).__name__)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout.strip()) == (0, "RuntimeRef"), p.stderr

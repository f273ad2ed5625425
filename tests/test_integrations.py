"""dispatch.integrations: importing a framework's helper module imports no framework (they are no dependency of
dispatch); the helpers themselves are tested with the framework in tests/training/test_lightning_integration.py."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_lightning_helpers_imports_neither_lightning_nor_torch() -> None:
    code = (
        "import sys, dispatch.integrations.lightning as m; "
        "print(sorted({'lightning', 'pytorch_lightning', 'torch'} & set(sys.modules))); "
        "print(m.latest_checkpoint('/nonexistent'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "None"]

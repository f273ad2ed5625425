"""The programs as files: each loads without its header, every file is shipped (package data globs), and the
constants a program shares with Python are the Python ones."""

from __future__ import annotations

from pathlib import Path

import pytest

import dispatch
from dispatch.adapterkit.programs import body, names, program
from dispatch.adapterkit.progress import MAX_REPORT
from dispatch.slurm import arrays, backend, progress, pruning, tasklines, trust

PACKAGES = ("dispatch.slurm", "dispatch.gridengine")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_program_loads_without_its_header(package: str) -> None:
    found = names(package)
    on_disk = Path(dispatch.__file__).parent / package.split(".")[1] / "programs"
    assert found == sorted(p.name for p in on_disk.iterdir()) and found
    for name in found:
        assert name.endswith((".sh", ".awk")), name  # the globs pyproject.toml ships
        text = program(package, name)
        assert text and not text.startswith("#") and not text.endswith("\n"), name


def test_the_header_ends_at_the_first_line_that_is_not_a_comment() -> None:
    assert body("#!/bin/bash\n# contract\n# more\necho a\n# kept\necho b\n") == "echo a\n# kept\necho b"


def test_shared_constants_are_set_from_python() -> None:
    assert f"\nmap_slack={pruning.MAP_SLACK}\nprefix={arrays.PREFIX}\nmap_max={trust.MAP_MAX}\n" in arrays.FIND
    assert f"\npointer_max={trust.POINTER_MAX}\n" in backend.POINTED
    assert f"\nlines_kept={tasklines.LINES_KEPT}\n" in tasklines.READ
    assert f"\nseparator={progress.SEPARATOR}\nmax_report={MAX_REPORT}\n" in progress.OBSERVE


def test_a_constant_without_its_one_line_is_refused() -> None:
    with pytest.raises(ValueError, match="0 lines set nothing_here"):
        program("dispatch.slurm", "stop.sh", nothing_here=1)
    assert "pointer_max='a b'" in program("dispatch.slurm", "pointed.sh", pointer_max="a b")  # quoted, not spliced

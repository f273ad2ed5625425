"""The submitter's umask, read without changing it (dispatch.umask), and the line that gives it to a rank."""

from __future__ import annotations

import os

import pytest

from dispatch.adapterkit.private import umask_line
from dispatch.umask import caller_umask


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077, 0o002, 0])
def test_the_callers_umask_is_read_and_left_as_it_was(mask: int) -> None:
    old = os.umask(mask)
    try:
        assert caller_umask() == mask
        assert umask_line() == f"umask {mask:04o}"
        assert os.umask(mask) == mask, "reading it changed it"
    finally:
        os.umask(old)

"""Directories of the user's alone, made and checked from this process (dispatch.adapterkit.private)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dispatch.adapterkit.private import private_dir
from dispatch.errors import ConfigError

NOBODY = 65534


def test_a_private_directory_is_made_0700_and_a_loose_one_refused(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        private_dir(str(tmp_path / "a" / "b"), "outputDir")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o700
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    with pytest.raises(ConfigError, match="may be written by others"):
        private_dir(str(loose), "outputDir")
    (tmp_path / "link").symlink_to(tmp_path / "a")
    with pytest.raises(ConfigError, match="symbolic link"):
        private_dir(str(tmp_path / "link"), "outputDir")
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(ConfigError, match="another user"):
        private_dir(str(theirs), "outputDir")

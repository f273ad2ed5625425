"""The sharedStorage setting and the SharedStorage answer it gives (Slurm and Grid Engine use it)."""

from __future__ import annotations

import pytest

from dispatch.adapterkit.storage import SharedStorageSettings, storage_answer, storage_paths
from dispatch.capabilities import Answer
from dispatch.errors import ConfigError, Unsupported
from dispatch.gridengine.settings import GridEngineSettings
from dispatch.settings import decode
from dispatch.slurm.settings import SlurmSettings
from dispatch.spi import StoragePaths


def test_without_the_setting_the_answer_is_no_and_says_what_to_configure() -> None:
    answer = storage_answer(None)
    assert answer.answer is Answer.NO and "sharedStorage.dir" in answer.reason
    with pytest.raises(Unsupported, match="the slurm cluster has no shared storage: no sharedStorage.dir"):
        storage_paths(None, "slurm")


def test_with_it_the_answer_is_yes_naming_both_paths() -> None:
    s = SharedStorageSettings(dir="/shared/calls", local_dir="/mnt/shared/calls")
    assert storage_answer(s).answer is Answer.YES
    assert "/shared/calls (here /mnt/shared/calls)" in storage_answer(s).reason
    assert storage_paths(s, "slurm") == StoragePaths(local="/mnt/shared/calls", remote="/shared/calls")
    assert SharedStorageSettings(dir="/shared").paths == StoragePaths(local="/shared", remote="/shared")


@pytest.mark.parametrize("bad", [{"dir": "relative"}, {"dir": "/ok", "localDir": "also/relative"}, {"dir": "/a\nb"}])
def test_a_bad_path_names_its_key(bad: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="sharedStorage"):
        decode(SlurmSettings, {"sharedStorage": bad}, path="")


def test_both_adapters_decode_it() -> None:
    slurm = decode(SlurmSettings, {"sharedStorage": {"dir": "/shared", "localDir": "/mnt/shared"}}, path="")
    assert slurm.shared_storage == SharedStorageSettings("/shared", "/mnt/shared")
    ge = decode(GridEngineSettings, {"sharedStorage": {"dir": "/shared"}}, path="")
    assert ge.shared_storage == SharedStorageSettings("/shared")

"""The launcher called as Hydra's sweeper calls it, in this process: ``launch()`` returns one ``JobReturn`` per
job, in order, with the task's return value or the exception it raised (its traceback on the cluster as the
cause), and each job's Hydra config (its number, and its dispatch job id as ``hydra.job.id``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra._internal.callbacks import Callbacks
from hydra._internal.hydra import Hydra
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from hydra.core.utils import JobStatus
from hydra.types import HydraContext, RunMode
from omegaconf import DictConfig

from dispatch.executor import RemoteTraceback
from dispatch.records import SQLiteRecords
from hydra_plugins.dispatch_launcher import launcher as plugin

from .sweep import TRAIN, environment, records_path


@pytest.fixture
def hydra_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hydra_restore_singletons: None) -> Iterator[Hydra]:
    """The example application's Hydra, in this process; Hydra's singletons are restored afterwards (the fixture
    of hydra-core's pytest plugin)."""
    for key, value in environment(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    app = Hydra.create_main_hydra_file_or_module(
        calling_file=str(TRAIN), calling_module=None, config_path="conf", job_name="train"
    )
    try:
        yield app
    finally:
        GlobalHydra.instance().clear()


def test_launch_returns_each_jobs_value_or_exception_in_order(hydra_app: Hydra, tmp_path: Path) -> None:
    def task(cfg: DictConfig) -> float:  # defined here, so it travels by value
        if cfg.lr > 0.5:
            raise ArithmeticError(f"lr {cfg.lr} is too large")
        return float(cfg.lr) * 10

    overrides = ["hydra/launcher=dispatch", f"hydra.sweep.dir={tmp_path}/multirun"]
    cfg = hydra_app.compose_config("config", overrides, run_mode=RunMode.MULTIRUN)
    HydraConfig.instance().set_config(cfg)
    context = HydraContext(config_loader=hydra_app.config_loader, callbacks=Callbacks(cfg))
    launcher = Plugins.instance().instantiate_launcher(hydra_context=context, task_function=task, config=cfg)
    assert isinstance(launcher, plugin.DispatchLauncher)  # the class as Hydra's plugin scan last made it

    returns = launcher.launch([["lr=0.1"], ["lr=0.9"], ["lr=0.3"]], initial_job_idx=4)

    assert [r.status for r in returns] == [JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.COMPLETED]
    assert [r.overrides for r in returns] == [["lr=0.1"], ["lr=0.9"], ["lr=0.3"]]
    assert returns[0].return_value == 1.0 and returns[2].return_value == 3.0
    with pytest.raises(ArithmeticError, match="lr 0.9 is too large") as raised:
        returns[1].return_value  # noqa: B018 - reading it raises the task's exception
    cause = raised.value.__cause__
    assert isinstance(cause, RemoteTraceback) and "is too large" in cause.text

    store = SQLiteRecords(str(records_path(tmp_path)))
    try:
        by_name = {s.name: s.id for s in store.summaries()}
    finally:
        store.close()
    for number, ret in zip((4, 5, 6), returns, strict=True):
        assert ret.hydra_cfg is not None
        job = ret.hydra_cfg.hydra.job
        assert job.num == number and job.id == by_name[f"train[{number}] {ret.overrides[0]}"]

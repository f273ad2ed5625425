"""The clusters the journey runs on: for each, the CLI configuration of one cluster and what differs by nature
(how many nodes it runs, the shortest time limit it honours, how to tell that its scheduler forgot a job).

Every adapter is held to the same assertions; these are the only differences allowed. A real cluster that is
not up FAILS with the command to start it (tests/slurm/clusters.py, tests/gridengine/cell.py): nothing skips.

Real or model: the local adapter, the three Slurm releases and the Grid Engine cell are the real thing. Kubeflow
runs twice: as a MODEL (:func:`kubeflow_model`, pytest id ``kubeflow-model``): dispatch_kubetest's in-process API
server and controllers, with a thread of the test as kubelet that runs each pod's command as a plain process of
this machine; and for real (:func:`kubeflow_real`, pytest id ``kubeflow-realpods``, marker ``realpods``): the real
control plane and the two real kubelets with containerd, each rank a container on its own node.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class Adapter:
    """One parametrization of the journey."""

    id: str
    adapter: str
    settings: dict[str, Any]
    nodes: int
    """The nodes of the journey's multi-rank jobs; a cluster that runs one-slot jobs only (Grid Engine) refuses
    two, and the journey asserts that refusal instead."""
    time_limit: str
    """A time limit the scheduler enforces soon (Slurm counts whole minutes)."""
    patience: float
    """Seconds a job may take to start, or to end once told to."""
    forgotten: Callable[[str], bool] | None = None
    """True once the scheduler no longer lists the object (None: it keeps every job, as the local adapter)."""
    extensions: tuple[str, ...] = ()
    """``-x KIND=JSON`` options every job needs here (Kubeflow: an image and a runtime)."""
    every_rank_logged: bool = True
    """``logs`` shows every rank's output; False: rank 0's only (Kubernetes keeps one log per pod, and dispatch
    reads rank 0's)."""
    separate_stderr: bool = True
    """stderr is kept apart from stdout; False: ``logs --stderr`` is refused (Kubernetes: one log per container)."""
    read_files: Callable[[str, str], str] | None = None
    """Where the adapter does not read output back (capability OutputRead no: Grid Engine), the text of a
    scheduler object's ``out`` or ``err`` file in the output directory it leaves; the journey then asserts that
    ``logs`` refuses clearly and reads the files as the user would."""
    close: Callable[[], None] | None = None
    model: bool = False
    """True: not the scheduler but a model of it in this process (its id, and its pytest id, say ``model``)."""


def config_toml(a: Adapter) -> str:
    """The CLI config file naming ``a`` as the default cluster ``journey``."""
    return f'default = "journey"\n\n[clusters.journey]\nadapter = "{a.adapter}"\nsettings = {_toml(a.settings)}\n'


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string of these characters is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items() if v is not None)
        return "{" + items + "}"
    raise TypeError(f"no TOML for {value!r}")


def local(tmp: Path) -> Adapter:
    state = tmp / "state" / "dispatch" / "local"  # where the cli fixture stops what a failed test left running
    return Adapter("local", "local", {"stateDir": str(state), "grace": "1s"}, 2, "3s", 30.0)


def slurm(name: str) -> Callable[[Path], Adapter]:
    def make(tmp: Path) -> Adapter:
        from dispatch.slurm.harness import settings_for
        from tests.slurm.clusters import admin, description

        desc = description(name)

        def forgotten(scheduler_id: str) -> bool:
            p = admin(name, "squeue", "-h", "-o", "%i", "-j", scheduler_id, check=False)
            return scheduler_id not in p.stdout

        return Adapter(f"slurm-{name}", "slurm", settings_for(desc), 2, "1m", 150.0, forgotten)

    return make


def gridengine(tmp: Path) -> Adapter:
    from tests.gridengine.cell import description

    desc = description()
    settings = {
        "sgeRoot": desc["sge_root"],
        "sgeCell": desc["sge_cell"],
        "queue": desc["queue"],
        "stateDir": str(tmp / "ge-state"),
        "outputDir": str(tmp / "ge-output"),
    }

    def forgotten(scheduler_id: str) -> bool:
        env = dict(os.environ, SGE_ROOT=desc["sge_root"], SGE_CELL=desc["sge_cell"])
        p = subprocess.run(["qstat", "-j", scheduler_id], capture_output=True, text=True, env=env, check=False)
        return p.returncode != 0

    def read_files(scheduler_id: str, stream: str) -> str:
        (path,) = (tmp / "ge-output").glob(f"*.{scheduler_id}.{stream}")
        return path.read_text()

    return Adapter("gridengine", "gridengine", settings, 1, "5s", 90.0, forgotten, read_files=read_files)


def kubeflow_model(tmp: Path) -> Adapter:
    """Kubeflow's model, not a cluster: the in-process API server and controllers of dispatch_kubetest, a thread
    as kubelet running the pods' commands as local processes (tests/journey/kubelet.py)."""
    from tests.journey.kubelet import ProcessKubelet

    kubelet = ProcessKubelet(tmp)
    return Adapter(
        "kubeflow-model",
        "kubeflow",
        kubelet.settings(),
        2,
        "5s",
        60.0,
        kubelet.forgotten,
        extensions=(
            "-x",
            'dispatch.Image={"ref": "registry.example/journey:1"}',
            "-x",
            'kubeflow.RuntimeRef={"name": "torch-distributed"}',
        ),
        every_rank_logged=False,
        separate_stderr=False,
        close=kubelet.close,
        model=True,
    )


def kubeflow_real(tmp: Path) -> Adapter:
    """The real thing on real pods: the control plane of scripts/k8s/controlplane-up.sh (kube-apiserver, the
    Trainer, JobSet, the Job controller, the scheduler) and the two real kubelets with containerd of
    scripts/k8s/nodes-up.sh; each rank a container on its own node (tests/kubeflow/realpods_harness.py)."""
    from dispatch.kubeflow import Mode
    from tests.kubeflow.realpods_harness import read_control_plane, real_cluster_in

    fixture = real_cluster_in(read_control_plane(), tmp, Mode.PLAIN)
    real = next(fixture)
    return Adapter(
        "kubeflow-realpods",
        "kubeflow",
        {
            "kubeconfig": {"path": real.base.cp["kubeconfig"]},
            "namespace": real.ns,
            "mode": "plain",
            "timeouts": {"apiserverRequest": "20s"},
            "preflight": {"probeWatch": "2s"},
        },
        2,
        "8s",
        90.0,
        real.forgotten,
        extensions=real.extensions(),
        every_rank_logged=False,
        separate_stderr=False,
        close=fixture.close,
    )


ADAPTERS = [
    pytest.param(local, id="local"),
    pytest.param(slurm("local"), id="slurm-22.05", marks=pytest.mark.slurm_local),
    pytest.param(slurm("trixie"), id="slurm-24.11", marks=pytest.mark.slurm_trixie),
    pytest.param(slurm("sid"), id="slurm-26.05", marks=pytest.mark.slurm_sid),
    pytest.param(gridengine, id="gridengine", marks=pytest.mark.gridengine),
    pytest.param(kubeflow_model, id="kubeflow-model"),
    pytest.param(kubeflow_real, id="kubeflow-realpods", marks=pytest.mark.realpods),
]

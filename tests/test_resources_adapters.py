"""One spec's ``resources`` in each adapter's own words: Slurm, Kubeflow, Grid Engine and the local adapter."""

from __future__ import annotations

import copy
import dataclasses
import shlex
from pathlib import Path

import pytest

from dispatch.clock import SYSTEM_CLOCK
from dispatch.errors import SpecError, Unsupported
from dispatch.extensions import Image
from dispatch.gridengine import submit as ge
from dispatch.gridengine.settings import Complexes, GridEngineSettings
from dispatch.kubeflow import names as n
from dispatch.kubeflow import render as rd
from dispatch.kubeflow.extensions import RuntimeRef
from dispatch.kubeflow.settings import KubeflowSettings
from dispatch.local.backend import LocalBackend
from dispatch.resources import Resources
from dispatch.settings import decode
from dispatch.slurm import extensions as slurm_ext
from dispatch.slurm import submit as slurm
from dispatch.slurm.settings import SlurmSettings
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest
from dispatch_kubetest import torch_runtime
from dispatch_kubetest.resources import TRAINJOB
from dispatch_kubetest.schema import admit

RESOURCES = Resources(gpus_per_node=2, cpus_per_proc=2, mem_per_node=4096)
SPEC = JobSpec(("python", "train.py"), resources=RESOURCES)


def request(spec: JobSpec = SPEC) -> StartRequest:
    return StartRequest("a1b2c3d4e5f6a7b8", 1, "dsp-a1b2c3d4e5f6a7b8-1", spec)


def slurm_argv(spec: JobSpec = SPEC) -> tuple[str, ...]:
    return slurm.build(request(spec), decode(SlurmSettings, {}), "22.05.8", "/o").argv


def trainjob(spec: JobSpec = SPEC, **settings: str) -> dict[str, object]:
    kube = dataclasses.replace(spec, extensions=(Image("registry.example/train:1"), RuntimeRef("torch-distributed")))
    s = decode(KubeflowSettings, {"namespace": "ml", **settings})
    req = request(kube)
    name = n.trainjob_name(req.job_id, req.submission)
    body = rd.render_trainjob(req, s, rd.check_runtime(torch_runtime()), name, name)
    admit(TRAINJOB, copy.deepcopy(body), strict=True)  # the Trainer CRD's schema accepts it, prunes nothing
    return body


def qsub_argv(spec: JobSpec = SPEC, complexes: Complexes | None = None) -> tuple[str, ...]:
    settings = GridEngineSettings(complexes=complexes or Complexes(cpu_pe="smp"))
    return ge.build(request(spec), settings, "/o").argv


def test_one_spec_asks_the_same_of_all_four_adapters(tmp_path: Path) -> None:
    argv = slurm_argv()
    assert {"--gpus-per-node=2", "--cpus-per-task=2", "--mem=4096M"} <= set(argv)
    assert "--exclusive" not in argv

    per_node = trainjob()["spec"]["trainer"]["resourcesPerNode"]  # type: ignore[index]
    want = {"nvidia.com/gpu": "2", "cpu": "2", "memory": "4096Mi"}
    assert per_node == {"limits": want, "requests": want}

    q = qsub_argv()
    # per slot (Grid Engine multiplies by slots); resident memory, not h_vmem (which kills CUDA processes)
    assert shlex.join(q).endswith("-pe smp 2 -l gpu=1,mem_free=2048M,h_rss=2048M")

    local = LocalBackend(tmp_path, SYSTEM_CLOCK, gpus=["0", "1"])
    plan = local.render(request())
    assert "CUDA_VISIBLE_DEVICES=0,1 " in plan and "# GPUs: CUDA_VISIBLE_DEVICES per rank 0,1" in plan


def test_a_gpu_type_is_each_schedulers_own_word() -> None:
    typed = dataclasses.replace(SPEC, resources=Resources(gpus_per_node=8, gpu_type="a100", exclusive=True))
    assert {"--gpus-per-node=a100:8", "--exclusive"} <= set(slurm_argv(typed))
    body = trainjob(dataclasses.replace(typed, resources=Resources(gpus_per_node=8, gpu_type="a100")),
                    gpuTypeLabel="nvidia.com/gpu.product")  # fmt: skip
    (patch,) = body["spec"]["runtimePatches"]  # type: ignore[index]
    assert patch["manager"] == n.RESOURCES_PATCH_MANAGER
    node = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    assert node["template"]["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "a100"}
    assert qsub_argv(typed, Complexes(gpu_type="gpu_model"))[-2:] == ("-l", "gpu=8,gpu_model=a100,exclusive=true")


@pytest.mark.parametrize(
    ("what", "words"),
    [
        (lambda: trainjob(dataclasses.replace(SPEC, resources=Resources(exclusive=True))), "node of its own"),
        (lambda: trainjob(dataclasses.replace(SPEC, resources=Resources(gpus_per_node=1, gpu_type="a100"))),
         "gpuTypeLabel"),
        (lambda: qsub_argv(SPEC, Complexes()), "complexes.cpuPe"),
        (lambda: qsub_argv(dataclasses.replace(SPEC, resources=Resources(gpus_per_node=3, cpus_per_proc=2)),
                           Complexes(cpu_pe="smp")), "cannot be divided"),
        (lambda: qsub_argv(dataclasses.replace(SPEC, resources=Resources(gpus_per_node=1)), Complexes(gpu=None)),
         "no GPU complex"),
    ],
)  # fmt: skip
def test_what_a_scheduler_cannot_say_is_refused_naming_the_setting(what: object, words: str) -> None:
    with pytest.raises(Unsupported, match=words):
        what()  # type: ignore[operator]


def test_the_deprecated_slurm_resources_still_render_and_may_not_ask_twice() -> None:
    old = JobSpec(("true",), extensions=(slurm_ext.Resources(gpus_per_node=4, mem_per_node="16G", mem_per_cpu=None),))
    assert {"--gpus-per-node=4", "--mem=16G"} <= set(slurm_argv(old))
    both = dataclasses.replace(old, resources=Resources(gpus_per_node=2))
    with pytest.raises(SpecError) as err:
        slurm_argv(both)
    assert err.value.path == "extensions.slurm.Resources.gpusPerNode"

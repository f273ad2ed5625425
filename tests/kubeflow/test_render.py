"""Rendering: the emitted TrainJob and runtime copy validate against the upstream models (kubeflow-trainer-api),
sit behind the right gate, carry the documented names, and never pass user text through a shell."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from kubeflow_trainer_api.models import TrainerV1alpha1TrainingRuntime, TrainerV1alpha1TrainJob

from dispatch.errors import Unsupported
from dispatch.extensions import CessationWarning, Image, SharedCheckpoint
from dispatch.kubeflow import names as n
from dispatch.kubeflow import render as rd
from dispatch.kubeflow.extensions import RuntimeRef
from dispatch.kubeflow.settings import KubeflowSettings, Mode
from dispatch.settings import decode
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest
from dispatch_kubetest import torch_runtime


def settings(mode: Mode = Mode.PLAIN, **over: Any) -> KubeflowSettings:
    data: dict[str, Any] = {"namespace": "ml", "mode": mode.value, **over}
    if mode is Mode.KUEUE:
        data.setdefault("localQueue", "team-a")
    return decode(KubeflowSettings, data)


def request(**spec: Any) -> StartRequest:
    base: dict[str, Any] = {
        "command": ("torchrun", "train.py", "--lr", "0.1; rm -rf /"),
        "nodes": 2,
        "procs_per_node": 4,
        "working_dir": "/work dir",
        "env": {"RUN": "exp1"},
        "time_limit": 90.5,
        "extensions": (Image("registry.example/train:1"), RuntimeRef("torch-distributed")),
    }
    base.update(spec)
    return StartRequest("a1b2c3d4e5f6", 2, "dsp-a1b2c3d4e5f6-2", JobSpec(**base))


def build(
    mode: Mode = Mode.PLAIN, runtime: dict[str, Any] | None = None, **spec: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    rt = runtime or torch_runtime()
    req = request(**spec)
    s = settings(mode)
    report = rd.check_runtime(rt)
    name = n.trainjob_name(req.job_id, req.submission)
    return rd.runtime_copy(rt, name, s, req), rd.render_trainjob(req, s, report, name, name)


@pytest.mark.parametrize("mode", list(Mode))
def test_trainjob_validates_against_upstream_models(mode: Mode) -> None:
    copy, tj = build(mode)
    TrainerV1alpha1TrainJob.model_validate(tj)
    TrainerV1alpha1TrainingRuntime.model_validate(copy)
    # nothing of ours was dropped by the model (it drops unknown fields silently)
    dumped = TrainerV1alpha1TrainJob.model_validate(tj).to_dict()
    assert dumped["spec"]["trainer"]["command"] == tj["spec"]["trainer"]["command"]
    assert dumped["spec"]["trainer"]["numNodes"] == 2 and dumped["spec"]["trainer"]["numProcPerNode"] == 4
    assert dumped["spec"]["activeDeadlineSeconds"] == 91


def test_plain_mode_gate_is_suspend() -> None:
    _, tj = build(Mode.PLAIN)
    assert tj["spec"]["suspend"] is True
    assert n.GATED_BY not in tj["metadata"]["annotations"]
    assert n.QUEUE_LABEL not in tj["metadata"]["labels"]
    assert tj["metadata"]["annotations"][n.GATE] == "closed"


def test_kueue_mode_gate_is_admission_gated_by() -> None:
    _, tj = build(Mode.KUEUE)
    assert tj["metadata"]["annotations"][n.GATED_BY] == "dispatch.io/start"
    assert tj["metadata"]["labels"][n.QUEUE_LABEL] == "team-a"
    assert tj["spec"]["suspend"] is True


def test_names_labels_and_identity_env() -> None:
    copy, tj = build()
    meta = tj["metadata"]
    assert meta["name"] == "dj-a1b2c3d4e5f6-2" and len(meta["name"]) <= n.MAX_NAME
    assert meta["labels"] == {n.MANAGED: "true", n.MARKER: "dsp-a1b2c3d4e5f6-2"}
    assert meta["annotations"][n.MARKER_FULL] == "dsp-a1b2c3d4e5f6-2"
    assert meta["annotations"][n.JOB_ID] == "a1b2c3d4e5f6" and meta["annotations"][n.SUBMISSION] == "2"
    assert tj["spec"]["runtimeRef"] == {
        "name": meta["name"],
        "kind": "TrainingRuntime",
        "apiGroup": "trainer.kubeflow.org",
    }
    env = {e["name"]: e for e in tj["spec"]["trainer"]["env"]}
    assert env["DISPATCH_JOB_ID"]["value"] == "a1b2c3d4e5f6" and env["DISPATCH_SUBMISSION"]["value"] == "2"
    assert (
        env["DISPATCH_ATTEMPT"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.annotations['dispatch.io/attempt']"
    )
    assert "jobset.sigs.k8s.io/restart-attempt" in env["DISPATCH_RESTART_A"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert env["RUN"]["value"] == "exp1"
    assert copy["metadata"]["annotations"][n.RUNTIME_SOURCE] == "ClusterTrainingRuntime/torch-distributed"
    assert copy["kind"] == "TrainingRuntime" and copy["metadata"]["namespace"] == "ml"


def test_long_or_odd_job_ids_hash_into_a_valid_name() -> None:
    name = n.trainjob_name("X_" * 40, 3)
    assert name.startswith("dj-") and name.endswith("-3") and len(name) <= n.MAX_NAME
    assert n.marker_label("bad marker!").startswith("h-")


def test_prologue_runs_argv_verbatim_and_sets_the_execution_identity(tmp_path: Any) -> None:
    _, tj = build(
        command=("printf", "%s|", "a b", "$(touch /tmp/x)", "; echo hi"), working_dir=str(tmp_path), procs_per_node=1
    )
    cmd = tj["spec"]["trainer"]["command"]
    env = {"PATH": "/usr/bin:/bin", "DISPATCH_JOB_ID": "j", "DISPATCH_SUBMISSION": "2", "DISPATCH_ATTEMPT": "3"}
    out = subprocess.run([*cmd], capture_output=True, text=True, env=env, check=True).stdout
    assert out == "a b|$(touch /tmp/x)|; echo hi|"
    probe = subprocess.run(
        [*cmd[:4], str(tmp_path), "sh", "-c", 'echo "$DISPATCH_EXECUTION $PWD"'],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.split()
    assert probe == ["j.2.3.0.0", str(tmp_path)]


@pytest.mark.parametrize(("umask", "seen"), [(0o027, "0027"), (None, "0022")])
def test_the_program_runs_under_the_specs_umask_or_the_images(umask: int | None, seen: str) -> None:
    """The submitter's umask (``JobSpec.umask``, recorded by the Cluster) as on Slurm; without one the image's
    default (0022 here, the pod's process started under it)."""
    _, tj = build(procs_per_node=1, umask=umask)
    cmd = tj["spec"]["trainer"]["command"]
    out = subprocess.run(
        ["sh", "-c", 'umask 0022; exec "$@"', "_", *cmd[:4], "", "sh", "-c", "umask"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert out.stdout.strip() == seen


RANK_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK", "MASTER_ADDR",
              "MASTER_PORT", "DISPATCH_RANK")  # fmt: skip


def rank_vars(tj: dict[str, Any], pod_env: dict[str, str]) -> dict[str, str]:
    """The rank variables the pod's command gives its program (``unset`` when absent), run here under ``pod_env``."""
    cmd = tj["spec"]["trainer"]["command"]
    env = {"PATH": "/usr/bin:/bin", **pod_env}
    out = subprocess.run([*cmd[:4], "", "env"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    seen = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    return {name: seen.get(name, "unset") for name in RANK_NAMES}


def test_a_rank_not_started_by_torchrun_gets_the_rank_environment_from_the_torch_runtime() -> None:
    _, tj = build(nodes=3, procs_per_node=1, command=("python", "train.py"))
    pet = {"PET_NNODES": "3", "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": "2", "PET_MASTER_ADDR": "m.svc"}
    got = rank_vars(tj, {**pet, "PET_MASTER_PORT": "29500", "JOB_COMPLETION_INDEX": "2"})
    assert got == {
        "RANK": "2",
        "WORLD_SIZE": "3",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "NODE_RANK": "2",
        "GROUP_RANK": "2",
        "MASTER_ADDR": "m.svc",
        "MASTER_PORT": "29500",
        "DISPATCH_RANK": "2",
    }


def test_without_pet_variables_the_rank_comes_from_the_job_index_and_the_rendezvous_from_jobset_names() -> None:
    _, tj = build(nodes=2, procs_per_node=1)
    got = rank_vars(tj, {"JOB_COMPLETION_INDEX": "1"})
    name = tj["metadata"]["name"]
    assert (got["RANK"], got["WORLD_SIZE"], got["NODE_RANK"]) == ("1", "2", "1")
    assert (got["MASTER_ADDR"], got["MASTER_PORT"]) == (f"{name}-node-0-0.{name}", "29500")


def test_torchrun_with_several_processes_per_node_sets_the_per_process_variables_itself() -> None:
    _, tj = build(nodes=2, procs_per_node=4, command=("python3", "-m", "torch.distributed.run", "t.py"))
    got = rank_vars(tj, {"PET_NODE_RANK": "1", "PET_MASTER_ADDR": "m", "PET_MASTER_PORT": "29500"})
    assert (got["WORLD_SIZE"], got["LOCAL_WORLD_SIZE"], got["NODE_RANK"]) == ("8", "4", "1")
    assert (got["RANK"], got["LOCAL_RANK"], got["DISPATCH_RANK"]) == ("unset", "unset", "unset")


def test_several_processes_per_node_without_torchrun_are_refused() -> None:
    with pytest.raises(Unsupported, match="a Kubeflow pod runs one process"):
        build(procs_per_node=2, command=("python", "train.py"))
    mpi = torch_runtime()
    mpi["spec"]["mlPolicy"] = {"numNodes": 1, "mpi": {}}
    with pytest.raises(Unsupported, match="only torchrun under a torch runtime"):
        build(runtime=mpi, procs_per_node=2)


def test_checkpoint_claim_is_mounted_in_the_copy() -> None:
    ckpt = SharedCheckpoint("/ckpt", claim="shared")
    copy, tj = build(extensions=(Image("i:1"), RuntimeRef("torch-distributed"), ckpt))
    pod = copy["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert {"name": rd.CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": "shared"}} in pod["volumes"]
    assert pod["containers"][0]["volumeMounts"] == [{"name": rd.CHECKPOINT_VOLUME, "mountPath": "/ckpt"}]
    env = {e["name"]: e.get("value") for e in tj["spec"]["trainer"]["env"]}
    assert env["DISPATCH_CHECKPOINT_DIR"] == "/ckpt"
    TrainerV1alpha1TrainingRuntime.model_validate(copy)


def test_cessation_warning_sets_the_trainer_pods_termination_grace() -> None:
    copy, tj = build(extensions=(Image("i:1"), RuntimeRef("torch-distributed"), CessationWarning(seconds=44.2)))
    pod = copy["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 45
    env = {e["name"]: e.get("value") for e in tj["spec"]["trainer"]["env"]}
    assert env["DISPATCH_CESSATION_GRACE"] == "45" and "DISPATCH_CESSATION_SIGNAL" not in env
    TrainerV1alpha1TrainingRuntime.model_validate(copy)


def test_runtime_that_can_restart_a_rank_is_reported() -> None:
    stock = torch_runtime(max_restarts=None, backoff_limit=None, restart_policy=None)
    report = rd.check_runtime(stock)
    assert report.rank_restart is not None and "backoffLimit" in report.rank_restart
    assert rd.check_runtime(torch_runtime()).rank_restart is None
    _, tj = build(runtime=stock)
    assert tj["metadata"]["annotations"][n.RANK_RESTART] == "allowed"


def test_refusals() -> None:
    with pytest.raises(Unsupported, match="reserved"):
        build(env={"PET_NNODES": "3"})
    no_policy = torch_runtime(torch=False)
    no_policy["spec"].pop("mlPolicy")
    with pytest.raises(Unsupported, match="only torchrun under a torch runtime"):
        build(runtime=no_policy)
    broken = torch_runtime()
    broken["spec"]["template"]["spec"]["replicatedJobs"][0]["name"] = "launcher"
    broken["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["metadata"]["labels"] = {}
    with pytest.raises(Unsupported, match="trainer step"):
        build(runtime=broken)

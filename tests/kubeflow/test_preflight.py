"""The preflight probe's objects: valid for the upstream Trainer API, and unable to run anything."""

from __future__ import annotations

import pytest
from kubeflow_trainer_api.models import TrainerV1alpha1TrainingRuntime, TrainerV1alpha1TrainJob

from dispatch.kubeflow import names as n
from dispatch.kubeflow import render as rd
from dispatch.kubeflow.preflight import PROBE_IMAGE, probe_runtime, probe_trainjob
from dispatch.kubeflow.settings import KubeflowSettings, Mode
from dispatch.settings import decode


def settings(mode: Mode) -> KubeflowSettings:
    data = {"namespace": "ml", "mode": mode.value}
    if mode is Mode.KUEUE:
        data["localQueue"] = "team-a"
    return decode(KubeflowSettings, data)


@pytest.mark.parametrize("mode", list(Mode))
def test_the_probe_names_its_own_runtime_and_both_validate_against_upstream_models(mode: Mode) -> None:
    s = settings(mode)
    runtime, tj = probe_runtime("dispatch-probe-1", s), probe_trainjob("dispatch-probe-1", s)
    TrainerV1alpha1TrainingRuntime.model_validate(runtime)
    TrainerV1alpha1TrainJob.model_validate(tj)
    ref = tj["spec"]["runtimeRef"]
    assert (ref["kind"], ref["name"]) == ("TrainingRuntime", runtime["metadata"]["name"])
    assert runtime["metadata"]["namespace"] == tj["metadata"]["namespace"] == "ml"
    assert runtime["metadata"]["labels"] == {n.MANAGED: "true", n.PROBE: "true"}


@pytest.mark.parametrize("mode", list(Mode))
def test_the_probe_cannot_run(mode: Mode) -> None:
    s = settings(mode)
    runtime, tj = probe_runtime("dispatch-probe-1", s), probe_trainjob("dispatch-probe-1", s)
    assert tj["spec"]["suspend"] is True and tj["metadata"]["annotations"][n.GATE] == "closed"
    if mode is Mode.KUEUE:
        assert tj["metadata"]["annotations"][n.GATED_BY] == s.gate_name
        assert tj["metadata"]["labels"][n.QUEUE_LABEL] == "team-a"
    # the Trainer's runtime webhook asks one replica and a container `node` for the trainer step
    step = rd.trainer_step(runtime)
    assert step["replicas"] == 1
    (container,) = step["template"]["spec"]["template"]["spec"]["containers"]
    assert container["name"] == n.TRAINER_CONTAINER
    # an image no node can pull (.invalid never resolves), a command that fails, no rank restart
    assert container["image"] == tj["spec"]["trainer"]["image"] == PROBE_IMAGE
    assert PROBE_IMAGE.split("/")[0].endswith(".invalid")
    assert container["command"] == tj["spec"]["trainer"]["command"] == ["/bin/false"]
    assert rd.check_runtime(runtime).rank_restart is None

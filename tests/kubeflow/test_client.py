"""The error table: apiserver answers -> dispatch sentinels, unit by unit and through injected faults."""

from __future__ import annotations

import httpx2
import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import Status

from dispatch.errors import NotFound, OutcomeUnknown, ReadOnly, Rejected, Unavailable, Unsupported
from dispatch.kubeflow import client as k
from dispatch.spi import StartRequest
from dispatch_kubetest.reactors.trainer import WEBHOOK_DENIED, runtime_missing
from dispatch_kubetest.resources import TRAINING_RUNTIME, TRAINJOB

from .harness import FakeCluster, job_spec


def api(code: int, reason: str = "", message: str = "") -> ApiError:
    return ApiError(status=Status(code=code, reason=reason, message=message))


@pytest.mark.parametrize(
    ("exc", "verb", "expected"),
    [
        (api(404, "NotFound"), "get", NotFound),
        (api(404, "NotFound"), "patch", NotFound),
        (api(409, "AlreadyExists"), "create", Rejected),
        (api(409, "Conflict"), "patch", Rejected),
        (api(410, "Expired"), "list", Unavailable),
        (api(422, "Invalid"), "create", Rejected),
        (api(400, "BadRequest"), "patch", Rejected),
        (api(403, "Forbidden", 'admission webhook "vtrainjob.kb.io" denied the request: x'), "patch", Rejected),
        (api(403, "Forbidden", 'trainjobs is forbidden: User "a" cannot create'), "create", ReadOnly),
        (api(403, "Forbidden", 'pods is forbidden: User "a" cannot list'), "list", Unsupported),
        (api(401, "Unauthorized"), "get", Unavailable),
        (api(429, "TooManyRequests"), "create", Unavailable),
        (api(500, "InternalError"), "create", OutcomeUnknown),
        (api(503, "ServiceUnavailable"), "get", Unavailable),
        (api(504, "Timeout"), "patch", OutcomeUnknown),
        (httpx2.ReadTimeout("slow"), "create", OutcomeUnknown),
        (httpx2.ReadTimeout("slow"), "get", Unavailable),
        (httpx2.ConnectError("refused"), "create", Unavailable),
        (httpx2.RemoteProtocolError("cut"), "delete", OutcomeUnknown),
    ],
)
def test_error_table(exc: Exception, verb: str, expected: type[Exception]) -> None:
    assert type(k.map_error(exc, verb, "TrainJob x")) is expected


def test_injected_faults_map_through_the_real_client(plain: FakeCluster) -> None:
    from dispatch.kubeflow.backend import KubeflowBackend

    b = plain.backend()
    assert isinstance(b, KubeflowBackend)
    try:
        plain.control.faults.fail_next(1, 500, method="POST", path_contains="trainjobs")
        with pytest.raises(OutcomeUnknown):
            b.start(StartRequest("j1", 1, "dsp-j1-1", job_spec("sleep")))
        # the create did not land here; the supervisor's find after the CallBound says so
        assert b.find("dsp-j1-1", 0) == []
        sid = b.start(StartRequest("j1", 1, "dsp-j1-1", job_spec("sleep")))
        plain.control.faults.fail_next(1, 503, method="GET", path_contains="trainjobs")
        with pytest.raises(Unavailable):
            b.open(sid)
        plain.control.faults.fail_next(1, 404, method="GET", path_contains="trainjobs")
        with pytest.raises(NotFound):
            b.stop_job(sid)
        # A request bound that the preflight's own reads meet on a loaded machine (0.5 s did not: the probe's
        # create timed out and the backend opened observe-only); the delayed PATCH outlasts it three times over.
        slow = plain.backend(timeouts={"apiserverRequest": "5s"}, preflight={"probe": False})
        plain.control.faults.delay(15.0, count=1, method="PATCH", path_contains="trainjobs")
        try:
            with pytest.raises(OutcomeUnknown):
                slow.open(sid)
        finally:
            slow.close()
    finally:
        b.close()


def test_token_setting_replaces_the_kubeconfig_credentials(plain: FakeCluster, tmp_path: object) -> None:
    from pathlib import Path

    from dispatch.kubeflow.backend import KubeflowBackend

    bare = plain.server.write_kubeconfig(Path(str(tmp_path)) / "bare-kubeconfig", token=None)
    plain.control.rbac.require_token = True
    plain.control.rbac.add_token("the-token", "alice")
    b = plain.backend(kubeconfig={"path": str(bare)}, token="the-token")
    assert isinstance(b, KubeflowBackend)
    try:
        users = {r.user for r in plain.server.requests() if r.user}
        assert "alice" in users
        assert "the-token" not in repr(b) and "the-token" not in repr(b.settings)
    finally:
        b.close()


def kueue_runtime_missing(name: str) -> str:
    """Kueue v0.19's TrainJob webhook refusing a runtime its cache does not have, word for word as seen on the test
    control plane (tests/kubeflow/test_controlplane_client.py gets it, or the Trainer's, from the real webhooks)."""
    return f"admission webhook \"vtrainjob.kb.io\" denied the request: runtime '{name}' not found"


@pytest.mark.parametrize("webhook", ["trainer", "kueue"])
def test_a_trainjob_refused_for_a_runtime_copy_the_webhook_has_not_seen_yet_is_created_again(
    plain: FakeCluster, webhook: str
) -> None:
    """Kueue's and the Trainer's webhooks read runtimes from their informer caches: right after the copy is created
    either may refuse the TrainJob as if the copy did not exist (seen on the test control plane under load). The
    create is made again."""
    b = plain.backend()
    try:
        name = "dj-lag-1"
        msg = runtime_missing("TrainingRuntime", name) if webhook == "trainer" else kueue_runtime_missing(name)
        plain.control.faults.fail_next(2, 403, method="POST", path_contains="/trainjobs", message=msg)
        sid = b.start(StartRequest("lag", 1, "dsp-lag-1", job_spec("sleep")))
        assert sid == name and plain.control.get(TRAINJOB, name) is not None
    finally:
        b.close()


def test_only_a_refusal_for_the_copy_itself_counts_as_the_webhooks_lag() -> None:
    for msg in (runtime_missing("TrainingRuntime", "dj-a-1"), kueue_runtime_missing("dj-a-1")):
        assert k.runtime_not_seen(msg, "dj-a-1")
        assert not k.runtime_not_seen(msg, "dj-a-11") and not k.runtime_not_seen(msg, "a-1")
    assert not k.runtime_not_seen(f'{WEBHOOK_DENIED}"dj-a-1" not found', "dj-a-1")  # not the Trainer's words


def test_a_trainjob_refused_for_good_leaves_no_runtime_copy(plain: FakeCluster) -> None:
    b = plain.backend()
    try:
        name = "dj-refused-1"
        msg = f"{WEBHOOK_DENIED}spec.trainer.numNodes: out of range"
        plain.control.faults.fail_next(1, 403, method="POST", path_contains="/trainjobs", message=msg)
        with pytest.raises(Rejected, match="out of range"):
            b.start(StartRequest("refused", 1, "dsp-refused-1", job_spec("sleep")))
        assert plain.control.get(TRAINJOB, name) is None
        assert plain.control.get(TRAINING_RUNTIME, name) is None
    finally:
        b.close()

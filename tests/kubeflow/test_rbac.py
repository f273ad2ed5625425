"""deploy/kubeflow/adapter-rbac.yaml grants exactly what the adapter uses, and a full life runs under it."""

from __future__ import annotations

from dispatch.kubeflow.preflight import permissions
from dispatch.kubeflow.settings import Mode
from dispatch.outcome import Cause, State
from dispatch.spi import StartRequest

from .harness import TOKEN, FakeCluster, job_spec
from .rbac_util import DEPLOY, grants


def used(mode: Mode) -> set[tuple[str, str, str, bool]]:
    return {
        (p.verb, p.group, p.resource + (f"/{p.subresource}" if p.subresource else ""), p.namespaced)
        for p in permissions(mode)
    }


def test_manifest_grants_exactly_what_the_code_uses() -> None:
    granted, _ = grants(DEPLOY / "adapter-rbac.yaml")
    assert granted == used(Mode.KUEUE)
    assert used(Mode.PLAIN) < granted


def test_a_whole_life_runs_under_the_manifest(kueue: FakeCluster) -> None:
    _, rules = grants(DEPLOY / "adapter-rbac.yaml")
    kueue.control.set_rules(TOKEN, rules)
    b = kueue.backend()
    from dispatch.kubeflow.backend import KubeflowBackend

    assert isinstance(b, KubeflowBackend)
    try:
        assert not b.read_only and b.preflight.can_log, b.preflight.reason
        sid = b.start(StartRequest("r1", 1, "dsp-r1-1", job_spec("sleep")))
        b.open(sid)
        ev = kueue.until(lambda: b.inspect(sid), lambda e: e.outcome.state is State.RUNNING, 10)
        assert ev.outcome.state is State.RUNNING
        kueue.control.append_log(kueue.rank0(sid)["metadata"]["name"], "hello")
        kueue.control.finish_log(kueue.rank0(sid)["metadata"]["name"])
        assert b"hello" in b"".join(b.stdout(sid))
        b.hold(sid, "h")
        b.release(sid, "h")
        b.stop_job(sid)
        kueue.tick(1)
        ev = b.inspect(sid)
        assert (ev.outcome.state, ev.outcome.cause) == (State.CANCELLED, Cause.CANCELLED)
        b.delete(sid)
        denied = [r for r in kueue.server.requests() if r.code == 403 and r.user == f"token:{TOKEN}"]
        assert denied == []
    finally:
        b.close()

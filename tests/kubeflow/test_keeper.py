"""dispatch.kubeflow.keeper: a followed log is kept whatever order the container's end, the pod's deletion and
the stream's end come in (each ordering forced here with a scripted log reader and pod state)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from dispatch.errors import NotFound
from dispatch.kubeflow.keeper import LogKeeper, PodState

KEY = ("dj-j-1", (1, 0, 0))


class Script:
    """A pod's log as ``follow=true`` serves it: each open runs the next of ``opens`` (chunks, then how the
    stream ends: None cleanly, an exception to raise), and ``state`` is what the watch shows after it."""

    def __init__(self, opens: list[tuple[list[bytes], BaseException | None, PodState]]) -> None:
        self.opens = opens
        self.state_now = PodState.RUNNING
        self.calls = 0
        self.release = threading.Event()

    def read(self, pod: str) -> Iterator[bytes]:
        assert pod == "p0"
        chunks, end, state = self.opens[min(self.calls, len(self.opens) - 1)]
        self.calls += 1
        yield from chunks
        self.release.wait(10)
        self.state_now = state
        if end is not None:
            raise end

    def state(self, pod: str, uid: str) -> PodState:
        assert (pod, uid) == ("p0", "u0")
        return self.state_now


def keeper(script: Script, cap: int = 1 << 20) -> LogKeeper:
    k = LogKeeper(script.read, script.state, cap=cap)
    assert k.follow(KEY, "p0", "u0")
    assert not k.follow(KEY, "p0", "u0")  # one follow per execution
    return k


def test_a_follow_that_ends_with_its_container_is_kept_whole() -> None:
    s = Script([([b"epoch 1\n", b"epoch 2\n"], None, PodState.ENDING)])
    k = keeper(s)
    got = k.kept(KEY)
    assert got is not None and not got.done  # still following: the container runs
    s.release.set()
    got = k.kept(KEY, wait=10)
    assert got is not None and got.done and got.data == b"epoch 1\nepoch 2\n" and got.size == 16
    assert "container's end" in got.how and k.following() == 0


def test_a_follow_the_pods_deletion_cut_keeps_what_it_read() -> None:
    s = Script([([b"epoch 1\n", b"saving\n"], ConnectionResetError("peer closed"), PodState.GONE)])
    k = keeper(s)
    s.release.set()
    got = k.kept(KEY, wait=10)
    assert got is not None and got.done and got.data == b"epoch 1\nsaving\n" and "pod went" in got.how


def test_a_follow_cut_while_the_pod_runs_is_opened_again_and_the_pod_gone_by_then_keeps_the_first_read() -> None:
    # a proxy cut the stream while the watch still shows the pod running; by the time it is opened again, the
    # deadline has deleted the pod: the open answers 404
    s = Script(
        [
            ([b"epoch 1\n"], ConnectionResetError("proxy"), PodState.RUNNING),
            ([], NotFound("pods p0 not found"), PodState.GONE),
        ]
    )
    k = keeper(s)
    s.release.set()
    got = k.kept(KEY, wait=10)
    assert got is not None and got.done and got.data == b"epoch 1\n" and s.calls == 2


def test_a_clean_end_the_watch_has_not_caught_up_with_reads_again_and_keeps_the_longest_read() -> None:
    # the stream ended (the container did) while the watch still showed the pod running: opened again, the
    # second read is cut shorter (the pod went mid-read): the first, longer read is the log
    s = Script(
        [
            ([b"a\n", b"b\n", b"c\n"], None, PodState.RUNNING),
            ([b"a\n"], ConnectionResetError("gone"), PodState.GONE),
        ]
    )
    k = keeper(s)
    s.release.set()
    got = k.kept(KEY, wait=10)
    assert got is not None and got.done and got.data == b"a\nb\nc\n" and s.calls == 2


def test_only_the_tail_is_kept() -> None:
    s = Script([([b"x" * 10, b"y" * 10, b"z" * 10], None, PodState.ENDING)])
    k = keeper(s, cap=8)
    s.release.set()
    got = k.kept(KEY, wait=10)
    assert got is not None and got.done and got.data == b"z" * 8 and got.size == 30


def test_never_followed_is_none_and_a_closed_keeper_starts_nothing() -> None:
    s = Script([([], None, PodState.ENDING)])
    k = LogKeeper(s.read, s.state)
    assert k.kept(KEY) is None
    k.close()
    assert not k.follow(KEY, "p0", "u0")

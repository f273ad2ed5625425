"""submitit's ``helpers``: :class:`Checkpointable`, :class:`DelayedSubmission` and :func:`as_completed`.

What happens to a Checkpointable here: when its execution is about to be stopped (SIGTERM: the time limit, a
preemption, a stop), rank 0's runner calls ``checkpoint(*args, **kwargs)`` (:mod:`dispatch.executor.run`); the
:class:`DelayedSubmission` it returns replaces the call, and the job's rules bring it back as a new submission
(:mod:`dispatch.compat.submitit.executor`: preemption always, the time limit ``max_num_timeout`` times), which
runs the saved call. Standard library only (a job imports this module to unpickle a Checkpointable).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, Self, TypeVar


class _Awaited(Protocol):
    """A job as :func:`as_completed` waits for it (:class:`~dispatch.compat.submitit.job.Job`): its future."""

    @property
    def _future(self) -> concurrent.futures.Future[Any]: ...


J = TypeVar("J", bound=_Awaited)


class DelayedSubmission:
    """A call to make later: ``function(*args, **kwargs)``; ``result()`` makes it (once) and keeps its value."""

    def __init__(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.function = function
        self.args = args
        self.kwargs = kwargs
        self._result: Any = None
        self._done = False

    def result(self) -> Any:
        if not self._done:
            self._result = self.function(*self.args, **self.kwargs)
            self._done = True
        return self._result

    def done(self) -> bool:
        return self._done


class Checkpointable:
    """A callable class whose ``checkpoint`` says how to go on after a stop: by default the callable itself, as
    it stands, with the same arguments. Override ``checkpoint`` to save less (a model to its own file) or to
    change the arguments; return None to save nothing (the next execution starts the call afresh)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        instance = super().__new__(cls)
        if not callable(instance):
            raise TypeError(f"{cls.__name__} is Checkpointable but has no __call__ method")
        return instance

    def checkpoint(self, *args: Any, **kwargs: Any) -> DelayedSubmission | None:
        """The call to run next time: this object, in its present state, with the same arguments."""
        function: Callable[..., Any] = self  # type: ignore[assignment]  # a subclass defines __call__
        return DelayedSubmission(function, *args, **kwargs)


def as_completed(jobs: Sequence[J], timeout: float | None = None, poll_frequency: float = 10) -> Iterator[J]:
    """The jobs as each is done (finished, failed or cancelled); TimeoutError when ``timeout`` seconds pass
    first. ``poll_frequency`` is accepted and not used: the jobs' futures are settled by their executor's one
    collector thread, and this waits on them (:func:`concurrent.futures.as_completed`), polling nothing."""
    del poll_frequency
    by_future = {job._future: job for job in jobs}
    for future in concurrent.futures.as_completed(by_future, timeout=timeout):
        yield by_future[future]

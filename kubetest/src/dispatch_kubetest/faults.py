"""Fault injection: failing answers, slow answers and dropped watch streams, set by tests.

Rules are matched in the order they were added; a rule with a ``count`` is used up after that
many matching requests. A matching failure answers with a proper ``Status`` body (and
``Retry-After`` for 429/503 when ``retry_after`` is set). Delays sleep on the server thread
before the request is handled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from .errors import StatusError

_MESSAGES = {
    429: "Too many requests, please try again later.",
    500: "Internal error occurred: injected fault",
    503: "The server is currently unable to handle the request (injected fault)",
    504: "Timeout: request did not complete within requested timeout",
}


@dataclass
class _Rule:
    kind: str  # "fail" or "delay"
    remaining: int | None
    code: int = 500
    seconds: float = 0.0
    method: str | None = None
    path_contains: str | None = None
    watch: bool | None = None
    retry_after: int | None = None
    message: str | None = None

    def matches(self, method: str, path: str, is_watch: bool) -> bool:
        return (
            (self.method is None or self.method.upper() == method)
            and (self.path_contains is None or self.path_contains in path)
            and (self.watch is None or self.watch == is_watch)
        )


class Faults:
    """The fault table of one server; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self._drop_epoch = 0
        self._abrupt = False
        self.requests_failed = 0
        self.on_drop: Callable[[], None] | None = None
        """Called after ``drop_watches()`` so waiting streams wake up at once (set by the server)."""

    def fail_next(
        self,
        count: int = 1,
        code: int = 500,
        *,
        method: str | None = None,
        path_contains: str | None = None,
        watch: bool | None = None,
        retry_after: int | None = None,
        message: str | None = None,
    ) -> None:
        """Answer the next ``count`` matching requests with ``code`` (500, 503, 429, 504, ...), the Status's
        message ``message`` where given (an admission webhook's refusal, say)."""
        with self._lock:
            self._rules.append(
                _Rule(
                    "fail",
                    count,
                    code=code,
                    method=method,
                    path_contains=path_contains,
                    watch=watch,
                    retry_after=retry_after,
                    message=message,
                )
            )

    def delay(
        self,
        seconds: float,
        count: int | None = None,
        *,
        method: str | None = None,
        path_contains: str | None = None,
    ) -> None:
        """Delay matching requests by ``seconds`` (``count=None``: until ``clear()``)."""
        with self._lock:
            self._rules.append(_Rule("delay", count, seconds=seconds, method=method, path_contains=path_contains))

    def pending(self) -> int:
        """How many fault rules are still armed."""
        with self._lock:
            return len(self._rules)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def drop_watches(self, abrupt: bool = False) -> None:
        """Close every open watch stream. ``abrupt=False`` ends the chunked body cleanly (what an
        apiserver does on its watch timeout); ``abrupt=True`` drops the TCP connection mid-stream."""
        with self._lock:
            self._drop_epoch += 1
            self._abrupt = abrupt
        if self.on_drop is not None:
            self.on_drop()

    @property
    def drop_epoch(self) -> int:
        with self._lock:
            return self._drop_epoch

    @property
    def drop_is_abrupt(self) -> bool:
        with self._lock:
            return self._abrupt

    def check(self, method: str, path: str, is_watch: bool) -> tuple[float, StatusError | None]:
        """The delay to apply and the error to answer with (if any) for this request."""
        delay = 0.0
        error: StatusError | None = None
        with self._lock:
            for r in list(self._rules):
                if not r.matches(method, path, is_watch):
                    continue
                if r.kind == "delay":
                    delay += r.seconds
                elif error is None:
                    headers = {"Retry-After": str(r.retry_after)} if r.retry_after is not None else {}
                    details = {"retryAfterSeconds": r.retry_after} if r.retry_after is not None else None
                    error = StatusError(
                        r.code, r.message or _MESSAGES.get(r.code, "injected fault"), details=details, headers=headers
                    )
                    self.requests_failed += 1
                else:
                    continue
                if r.remaining is not None:
                    r.remaining -= 1
                    if r.remaining <= 0:
                        self._rules.remove(r)
        return delay, error

"""One call made to several hosts (or objects), and what the whole call then is.

An adapter without a scheduler (ranks on a fixed list of SSH hosts) makes most calls to every host of a job:
start the ranks, signal them, read their state. Each host answers for itself; the SPI wants one answer for the
call. The rule, the same for every such adapter:

* every host answered: the answers, host by host;
* a **write** that no host carried out and none may have (every failure ``Unavailable``): ``Unavailable``, the
  call had no effect anywhere and may be made again;
* a **write** that some host carried out (or may have: ``OutcomeUnknown``) while another did not:
  ``OutcomeUnknown``, because the call took effect in part: the core must not repeat it blindly and resolves
  it by observation (a partly started job is found by its marker, a partly stopped one is seen ending);
* a **read** with a host missing: ``Unavailable`` (a view with a host missing is not a view of the job);
* a host that refused (``Rejected``, ``NotFound``, ...) while none acted: that refusal, as it came.

:func:`call_each` makes the calls (concurrently: one slow host does not hold up the others) and collects each
host's answer or error; :func:`settle` applies the rule. :func:`spread` is the other direction: one failure of a
batched call (one script, one request for many objects) given to every object it was for, each its own copy.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from dispatch.errors import DispatchError, OutcomeUnknown, Unavailable

T = TypeVar("T")
E = TypeVar("E", bound=DispatchError)

MAX_PARALLEL = 16
"""At most this many calls of :func:`call_each` at once."""


def call_each(targets: Sequence[str], call: Callable[[str], T]) -> dict[str, T | DispatchError]:
    """``call(target)`` for every target, concurrently; each target's answer, or the DispatchError it raised
    (any other exception propagates: it is a bug, not an answer)."""
    if not targets:
        return {}
    if len(set(targets)) != len(targets):
        raise ValueError(f"a target is named twice in {list(targets)}")

    def one(target: str) -> T | DispatchError:
        try:
            return call(target)
        except DispatchError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(targets))) as pool:
        return dict(zip(targets, pool.map(one, targets), strict=True))


def settle(what: str, answers: Mapping[str, T | DispatchError], *, write: bool) -> dict[str, T]:
    """The whole call's answer by the rule of this module: every host's answer, or the one error that stands
    for the call (its message names each host and what it said)."""
    if not answers:
        raise ValueError(f"{what}: no host was asked")
    done = {t: a for t, a in answers.items() if not isinstance(a, DispatchError)}
    errors = {t: a for t, a in answers.items() if isinstance(a, DispatchError)}
    if not errors:
        return done
    doubt = {t: e for t, e in errors.items() if isinstance(e, OutcomeUnknown)}
    unreached = {t: e for t, e in errors.items() if isinstance(e, Unavailable)}
    refused = {t: e for t, e in errors.items() if t not in doubt and t not in unreached}

    def said(part: Mapping[str, DispatchError]) -> str:
        return "; ".join(f"{t}: {e}" for t, e in sorted(part.items()))

    if write and (done or doubt):
        parts = [f"done on {', '.join(sorted(done))}" if done else "", f"in doubt on {said(doubt)}" if doubt else ""]
        parts.append(f"not done on {said({**unreached, **refused})}" if unreached or refused else "")
        raise OutcomeUnknown(f"{what} took effect in part: " + ", ".join(p for p in parts if p))
    if refused:  # done on no host: a refusal is an answer, and repeating the call would meet it again
        raise refused[min(refused)]
    missing = {**unreached, **doubt}
    if len(missing) == len(answers):
        raise Unavailable(f"{what}: no host answered ({said(missing)})")
    raise Unavailable(f"{what}: answered by {', '.join(sorted(done))} only ({said(missing)})")


def spread(error: E, count: int) -> list[E]:
    """``error`` for each of ``count`` items of a batched call that failed as a whole (each its own copy, so
    that setting one item's attributes, such as ``job_id``, leaves the others alone)."""
    return [copy.copy(error) for _ in range(count)]

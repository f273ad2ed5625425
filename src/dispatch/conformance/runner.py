"""Run the conformance suites outside pytest, against any harness, and report each check's result.

This is what ``dispatch conformance`` runs: a third party points it at a harness factory (``module:callable``)
for its own cluster and gets one line per check (passed, failed, skipped with the reason, or not applicable)
and a JSON report. The same checks run inside the project's pytest suites.

A harness factory is called with one mapping (the ``--config`` file's content, empty without one) and returns
a :class:`~dispatch.conformance.harness.Harness` or a :class:`~dispatch.conformance.core.CoreHarness`. The core
suite runs on a CoreHarness; a plain Harness gets one with no ``exit_spec`` and no ``admin_release``. Either way,
a harness without ``inject`` gets the shipped fault-injection wrapper (:mod:`dispatch.conformance.faults`).
"""

from __future__ import annotations

import importlib
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from dispatch.conformance.checks import CHECKS, Check, NotApplicable, Skip, applicable, with_needs
from dispatch.conformance.core import CORE_CHECKS, CoreCheck, CoreHarness
from dispatch.conformance.faults import with_faults
from dispatch.conformance.harness import Harness
from dispatch.errors import ConfigError

SUITES = ("backend", "core")


class Result(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    NOT_APPLICABLE = "not-applicable"


@dataclass(frozen=True)
class CheckResult:
    suite: str
    check: str
    result: Result
    seconds: float
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "check": self.check,
            "result": self.result.value,
            "seconds": round(self.seconds, 3),
            "detail": self.detail,
        }


def load_factory(spec: str) -> Callable[[Mapping[str, Any]], Any]:
    """The callable named by ``module:attribute``; ConfigError ``harness`` when it cannot be found."""
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ConfigError("harness", f"{spec!r} is not of the form module:callable")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError("harness", f"cannot import {module!r}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError("harness", f"{module!r} has no {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError("harness", f"{spec} is not callable")
    return obj  # type: ignore[no-any-return]


def core_harness_of(h: Harness | CoreHarness) -> CoreHarness:
    """A CoreHarness for ``h``, with the fault wrapper when it has no ``inject`` of its own."""
    core = h if isinstance(h, CoreHarness) else CoreHarness(base=h)
    return core if core.inject is not None else with_faults(core)


def check_names() -> dict[str, list[str]]:
    return {"backend": [c.name for c in CHECKS], "core": [c.name for c in CORE_CHECKS]}


def run_suites(
    h: Harness | CoreHarness,
    suites: Iterable[str] = SUITES,
    only: Iterable[str] | None = None,
    *,
    strict: bool = False,
    progress: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Run the checks of ``suites`` (all, or the names in ``only``) and return their results in order.

    One rule in both suites: a check that cannot apply to the backend (it lacks the interface or capability the
    check is about) is ``not-applicable`` with the Reason, never a failure; a check that applies but whose
    situation the harness cannot make is ``skipped``, and with ``strict`` counts as failed. A failure's detail
    ends with the check's preconditions."""
    wanted = set(suites)
    bad = wanted - set(SUITES)
    if bad:
        raise ConfigError("suite", f"unknown suite(s) {', '.join(sorted(bad))}; expected {', '.join(SUITES)}")
    chosen = set(only) if only is not None else None
    if chosen is not None:
        known = {n for names in check_names().values() for n in names}
        if chosen - known:
            raise ConfigError("check", f"unknown check(s): {', '.join(sorted(chosen - known))}")
    core = core_harness_of(h)
    results: list[CheckResult] = []

    def record(r: CheckResult) -> None:
        results.append(r)
        if progress is not None:
            progress(r)

    if "backend" in wanted:
        for c in CHECKS:
            if chosen is None or c.name in chosen:
                record(_run_backend(c, core.base, strict))
    if "core" in wanted:
        for cc in CORE_CHECKS:
            if chosen is None or cc.name in chosen:
                record(_run_core(cc, core, strict))
    return results


def _run_backend(c: Check, h: Harness, strict: bool) -> CheckResult:
    t0 = time.monotonic()
    probe = h.backend()
    try:
        reason = applicable(c, probe)
    finally:
        probe.close()
    if reason is not None:
        return CheckResult("backend", c.name, Result.NOT_APPLICABLE, 0.0, reason)
    return _timed("backend", c.name, c.needs, lambda: c.fn(h), t0, strict)


def _run_core(c: CoreCheck, h: CoreHarness, strict: bool) -> CheckResult:
    return _timed("core", c.name, c.needs, lambda: c.fn(h), time.monotonic(), strict)


def _timed(suite: str, name: str, needs: str, fn: Callable[[], None], t0: float, strict: bool) -> CheckResult:
    try:
        fn()
    except NotApplicable as exc:
        return CheckResult(suite, name, Result.NOT_APPLICABLE, time.monotonic() - t0, str(exc))
    except Skip as exc:
        if strict:
            detail = with_needs(f"applies but skipped under --strict: {exc}", needs)
            return CheckResult(suite, name, Result.FAILED, time.monotonic() - t0, detail)
        return CheckResult(suite, name, Result.SKIPPED, time.monotonic() - t0, str(exc))
    except Exception as exc:  # a check's failure, or the backend's bug: both are this check's result
        detail = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, AssertionError):
            detail += "\n" + "".join(traceback.format_exception(exc)[-3:])
        return CheckResult(suite, name, Result.FAILED, time.monotonic() - t0, with_needs(detail, needs))
    return CheckResult(suite, name, Result.PASSED, time.monotonic() - t0)


def checks_table() -> str:
    """Every check of both suites as a Markdown table: suite, name, what it proves, what it needs.

    docs/spi.md holds this table verbatim (a test compares them), so the preconditions a check's failure names
    are the ones a harness author reads beforehand."""
    rows = ["| suite | check | what it proves | needs |", "|---|---|---|---|"]

    def cell(text: str) -> str:
        return " ".join(text.split()).replace("|", "\\|") or "-"

    for suite, items in (("backend", CHECKS), ("core", CORE_CHECKS)):
        for c in items:
            need = c.needs
            if isinstance(c, Check) and c.requires is not None:
                need = f"a {c.requires.__name__}" + (f"; {need}" if need else "")
            rows.append(f"| {suite} | `{c.name}` | {cell(c.doc.split(chr(10) + chr(10))[0])} | {cell(need)} |")
    return "\n".join(rows) + "\n"


def summary(results: Iterable[CheckResult]) -> dict[str, int]:
    out = {r.value: 0 for r in Result}
    for r in results:
        out[r.result.value] += 1
    return out


__all__ = [
    "SUITES",
    "CheckResult",
    "Result",
    "check_names",
    "checks_table",
    "core_harness_of",
    "load_factory",
    "run_suites",
    "summary",
]

"""Recovery rules as data: which outcome leads to which action, with limits and backoff.

A rules file is TOML, YAML or JSON::

    unmatched = "escalate"          # what happens when an ended, unsuccessful execution matches no rule
    [limits]
    total = 10                      # recovery actions over the job's life, all rules together
    causes = { preempted = 20 }     # recovery actions per cause

    [[rules]]
    name = "preemption"             # optional; defaults to rules[<index>]
    cause = ["preempted", "node-lost", "cessation"]
    action = "resubmit"
    limit = 5                       # times this rule may fire
    backoff = "30s"                 # wait before acting: backoff x 2^(times fired), capped by backoffMax
    backoffMax = "10m"
    excludeBlamedNodes = true       # optional: the new submission avoids the nodes the ending blamed

    [[rules]]
    cause = "exit"
    exitCodes = [75]                # optional; only for cause "exit"
    maxExecutions = 3               # optional: match while the job has had at most this many executions
    action = "requeue"

    [[rules]]
    cause = "stalled"
    stalledAfter = "10m"            # a running execution whose ranks reported no progress for this long is
    action = "resubmit"             # ended by the supervisor with cause "stalled" (needs ProgressReporting)
    limit = 3

Actions: ``resubmit`` (a new submission, N+1), ``requeue`` (the same submission again, through the backend's
Requeuer), ``readmit`` (authorise the readmission of the same submission after its queue evicted it, through
the backend's Readmitter: Kueue re-creates the pods, so it runs as a new execution), ``restart`` (the scheduler
restarts in place by its native policy), ``hold`` (a new submission kept under a dispatch hold until released),
``escalate`` (stop and hand the job to a human). A rule whose limit is reached does not match; when nothing
matches, ``unmatched`` decides: ``escalate`` (the default) or ``close`` (leave the job ended as it is).

Rules are validated against the cluster when loaded (:meth:`RuleSet.check_against`): a ``hold`` or
``requeue`` the cluster cannot perform, or ``excludeBlamedNodes`` where NodeExclusion is not yes, is a
:class:`~dispatch.errors.ConfigError` naming the rule; a
``restart`` is accepted only where the backend compiles it into its scheduler's native policy
(:class:`~dispatch.spi.NativePolicyCompiler`), and a ``readmit`` only where the backend is a
:class:`~dispatch.spi.Readmitter` and the cluster's ReadmissionGate is yes; both are refused with
:class:`~dispatch.errors.Unsupported` and the reason everywhere else, so no rule is accepted that nothing would
carry out.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from dispatch.capabilities import Answer, Capabilities, Capability, CapabilityAnswer, no, yes
from dispatch.errors import ConfigError, Unsupported
from dispatch.outcome import Cause, State
from dispatch.settings import parse_duration


class RuleAction(StrEnum):
    RESUBMIT = "resubmit"
    REQUEUE = "requeue"
    READMIT = "readmit"
    RESTART = "restart"
    HOLD = "hold"
    ESCALATE = "escalate"


class Unmatched(StrEnum):
    ESCALATE = "escalate"
    CLOSE = "close"


_RULE_KEYS = {
    "name",
    "cause",
    "state",
    "exitCodes",
    "maxExecutions",
    "action",
    "limit",
    "backoff",
    "backoffMax",
    "excludeBlamedNodes",
    "stalledAfter",
}
_NEW_SUBMISSION_ACTIONS = frozenset({RuleAction.RESUBMIT, RuleAction.HOLD})
"""The actions that make a new submission, the only ones that can be kept off nodes."""
_TOP_KEYS = {"unmatched", "limits", "rules"}


@dataclass(frozen=True)
class Rule:
    name: str
    causes: frozenset[Cause]
    action: RuleAction
    states: frozenset[State] = frozenset()
    exit_codes: frozenset[int] = frozenset()
    max_executions: int | None = None
    limit: int | None = None
    backoff: float = 0.0
    backoff_max: float = 3600.0
    exclude_blamed_nodes: bool = False
    """The new submission avoids the nodes the job's endings blamed (see :mod:`dispatch.supervise.blame`)."""
    stalled_after: float | None = None
    """Seconds without progress after which a running execution is judged ``stalled`` (rules naming that cause
    only; see :mod:`dispatch.supervise.stall`)."""

    def matches(self, state: State, cause: Cause, exit_code: int | None, executions: int) -> bool:
        if cause not in self.causes:
            return False
        if self.states and state not in self.states:
            return False
        if self.exit_codes and (exit_code is None or exit_code not in self.exit_codes):
            return False
        return self.max_executions is None or executions <= self.max_executions

    def delay(self, fired: int) -> float:
        """Backoff before the (fired+1)-th application."""
        if self.backoff <= 0:
            return 0.0
        return float(min(self.backoff * (2**fired), self.backoff_max))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "cause": sorted(c.value for c in self.causes),
            "action": self.action.value,
        }
        if self.states:
            out["state"] = sorted(s.value for s in self.states)
        if self.exit_codes:
            out["exitCodes"] = sorted(self.exit_codes)
        if self.max_executions is not None:
            out["maxExecutions"] = self.max_executions
        if self.limit is not None:
            out["limit"] = self.limit
        if self.backoff:
            out["backoff"] = self.backoff
            out["backoffMax"] = self.backoff_max
        if self.exclude_blamed_nodes:
            out["excludeBlamedNodes"] = True
        if self.stalled_after is not None:
            out["stalledAfter"] = self.stalled_after
        return out


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...] = ()
    unmatched: Unmatched = Unmatched.ESCALATE
    total_limit: int | None = None
    cause_limits: Mapping[Cause, int] = field(default_factory=dict)

    @property
    def stall_bound(self) -> float | None:
        """The shortest ``stalledAfter`` of the rules (None: no rule judges stalls, so nothing is ever judged
        ``stalled``)."""
        bounds = [r.stalled_after for r in self.rules if r.stalled_after is not None]
        return min(bounds) if bounds else None

    # ----- loading ---------------------------------------------------------------------------------------

    @classmethod
    def from_data(cls, data: object) -> RuleSet:
        """Decode rules from their data form; ConfigError names the bad key (``rules[2].action``)."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ConfigError("", f"rules must be a mapping, got {type(data).__name__}")
        for key in data:
            if key not in _TOP_KEYS:
                raise ConfigError(str(key), f"unknown key (known: {', '.join(sorted(_TOP_KEYS))})")
        unmatched = _enum(Unmatched, data.get("unmatched", "escalate"), "unmatched")
        limits = data.get("limits", {})
        if not isinstance(limits, Mapping):
            raise ConfigError("limits", "must be a mapping")
        for key in limits:
            if key not in ("total", "causes"):
                raise ConfigError(f"limits.{key}", "unknown key (known: causes, total)")
        total = _count(limits.get("total"), "limits.total")
        raw_causes = limits.get("causes", {})
        if not isinstance(raw_causes, Mapping):
            raise ConfigError("limits.causes", "must be a mapping of cause to count")
        cause_limits: dict[Cause, int] = {}
        for k, v in raw_causes.items():
            cause = _enum(Cause, k, f"limits.causes.{k}")
            count = _count(v, f"limits.causes.{k}")
            assert count is not None
            cause_limits[cause] = count
        raw_rules = data.get("rules", [])
        if not isinstance(raw_rules, list):
            raise ConfigError("rules", "must be a list of rules")
        rules = tuple(_rule(r, i) for i, r in enumerate(raw_rules))
        names = [r.name for r in rules]
        for i, n in enumerate(names):
            if n in names[:i]:
                raise ConfigError(f"rules[{i}].name", f"the name {n!r} is used twice")
        return cls(rules, unmatched, total, cause_limits)

    @classmethod
    def load(cls, path: str | Path) -> RuleSet:
        """Read a rules file (.toml, .yaml/.yml or .json). Errors name the file and the key."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError("", f"cannot read rules file {p}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError("", f"{p} is not UTF-8 text (byte {exc.start})") from None
        import yaml  # imported here: it is a third of the CLI's start-up time

        try:
            if p.suffix == ".toml":
                data: object = tomllib.loads(text)
            elif p.suffix in (".yaml", ".yml"):
                data = yaml.safe_load(text)
            elif p.suffix == ".json":
                data = json.loads(text)
            else:
                raise ConfigError("", f"{p}: a rules file ends in .toml, .yaml, .yml or .json")
        except (tomllib.TOMLDecodeError, yaml.YAMLError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError("", f"{p} is not valid {p.suffix[1:].upper()}: {exc}") from None
        try:
            return cls.from_data(data)
        except ConfigError as exc:
            raise ConfigError(exc.path, f"{exc.message} (in {p})") from None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"unmatched": self.unmatched.value, "rules": [r.to_json() for r in self.rules]}
        limits: dict[str, Any] = {}
        if self.total_limit is not None:
            limits["total"] = self.total_limit
        if self.cause_limits:
            limits["causes"] = {c.value: n for c, n in self.cause_limits.items()}
        if limits:
            out["limits"] = limits
        return out

    # ----- validation against a cluster ------------------------------------------------------------------

    def check_against(self, backend: object, capabilities: Capabilities) -> None:
        """Raise naming the first rule whose action this cluster cannot perform: Unsupported for a ``restart``
        or a ``readmit`` no interface of the backend carries out, ConfigError for the other actions."""
        for i, rule in enumerate(self.rules):
            if rule.exclude_blamed_nodes and not capabilities[Capability.NODE_EXCLUSION].yes:
                cap = capabilities[Capability.NODE_EXCLUSION]
                raise ConfigError(
                    f"rules[{i}].excludeBlamedNodes",
                    f"rule {rule.name!r}: NodeExclusion is {cap.answer.value} on this cluster: {cap.reason}",
                )
            progress = capabilities[Capability.PROGRESS_REPORTING]
            if rule.stalled_after is not None and not progress.yes:
                raise ConfigError(
                    f"rules[{i}].stalledAfter",
                    f"rule {rule.name!r} judges stalls, but ProgressReporting is {progress.answer.value} on this "
                    f"cluster: {progress.reason}",
                )
            answer = action_availability(rule.action, backend, capabilities, rule)
            if answer.answer is not Answer.YES and rule.action in (RuleAction.RESTART, RuleAction.READMIT):
                which = f"rules[{i}]" if rule.name == f"rules[{i}]" else f"rules[{i}] (rule {rule.name!r})"
                raise Unsupported(f"{which}: action {rule.action.value} is refused on this cluster: {answer.reason}")
            if answer.answer is not Answer.YES:
                raise ConfigError(
                    f"rules[{i}]",
                    f"rule {rule.name!r}: action {rule.action.value} is {answer.answer.value} on this cluster: "
                    f"{answer.reason}",
                )

    def find(
        self, state: State, cause: Cause, exit_code: int | None, executions: int, counters: Mapping[str, int]
    ) -> tuple[Rule | None, str]:
        """The first rule that matches and is within its limits, or None with the reason nothing applies."""
        if self.total_limit is not None and counters.get("total", 0) >= self.total_limit:
            return None, f"the total limit of {self.total_limit} recovery actions is reached"
        cause_limit = self.cause_limits.get(cause)
        if cause_limit is not None and counters.get(f"cause:{cause.value}", 0) >= cause_limit:
            return None, f"the limit of {cause_limit} recovery actions for {cause.value} is reached"
        limited = []
        for rule in self.rules:
            if not rule.matches(state, cause, exit_code, executions):
                continue
            if rule.limit is not None and counters.get(f"rule:{rule.name}", 0) >= rule.limit:
                limited.append(rule.name)
                continue
            return rule, f"rule {rule.name!r} matches {cause.value}"
        if limited:
            return None, f"rule {limited[0]!r} matches but its limit is reached"
        return None, f"no rule matches {cause.value}"


def action_availability(
    action: RuleAction, backend: object, capabilities: Capabilities, rule: Rule | None = None
) -> CapabilityAnswer:
    """Whether ``action`` can be carried out on this cluster, with the reason.

    ``restart`` is yes only when NativeRestart is yes and the backend's ``compile_policy`` takes the rule
    (``rule``, or a catch-all restart rule) into its native policy: the scheduler then restarts in place by
    itself and the supervisor waits for it. Nothing else carries a restart out.

    ``requeue`` is yes only when the backend is a Requeuer that can requeue an ended execution (rules act on
    ended executions; a Requeuer that cannot says so through ``requeue_after_end``, see
    :class:`dispatch.spi.Requeuer`).

    ``readmit`` is yes only when the backend is a Readmitter and ReadmissionGate is yes (an evicted object
    waits until dispatch authorises it); otherwise the answer says which is missing.
    """
    from dispatch.spi import Holder, NativePolicyCompiler, Readmitter, Requeuer

    if action in (RuleAction.RESUBMIT, RuleAction.ESCALATE):
        return yes("always available: a new submission, or a record for humans")
    if action is RuleAction.HOLD:
        cap = capabilities[Capability.HOLD]
        if not isinstance(backend, Holder):
            return no("the backend offers no Holder (a zero CallBound, or the scheduler cannot hold)")
        return cap
    if action is RuleAction.REQUEUE:
        if not isinstance(backend, Requeuer):
            return no("the backend offers no Requeuer")
        after_end = getattr(backend, "requeue_after_end", None)
        if after_end is not None:
            answer: CapabilityAnswer = after_end()
            if not answer.yes:
                return answer
        return yes("the backend offers a Requeuer with a non-zero CallBound")
    if action is RuleAction.READMIT:
        if not isinstance(backend, Readmitter):
            return no(
                "the backend offers no Readmitter: nothing here waits for dispatch to readmit an evicted job "
                "(a zero CallBound, or a scheduler without a readmission gate dispatch opens); use resubmit"
            )
        gate = capabilities[Capability.READMISSION_GATE]
        if not gate.yes:
            why = f"ReadmissionGate is {gate.answer.value}: {gate.reason}"
            return CapabilityAnswer(gate.answer, why, gate.provenance)
        return yes(f"the backend offers a Readmitter; ReadmissionGate: {gate.reason}", gate.provenance)
    cap = capabilities[Capability.NATIVE_RESTART]
    if not cap.yes:
        return cap
    if not isinstance(backend, NativePolicyCompiler):
        return no("NativeRestart is yes but the backend cannot compile rules into its native policy")
    wanted = rule.to_json() if rule is not None else {"action": RuleAction.RESTART.value}
    if not backend.compile_policy([wanted]).native:
        return no("the backend does not compile this restart rule into its scheduler's native policy")
    return cap


def _enum(cls: Any, value: object, path: str) -> Any:
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(m.value for m in cls)
        raise ConfigError(path, f"must be one of {allowed}, got {value!r}") from None


def _count(value: object, path: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(path, f"must be a whole number >= 0, got {value!r}")
    return value


def _set(value: object, path: str, cls: Any) -> frozenset[Any]:
    items: Sequence[object] = value if isinstance(value, list) else [value]
    if not items:
        raise ConfigError(path, "must name at least one value")
    return frozenset(_enum(cls, v, f"{path}[{i}]" if isinstance(value, list) else path) for i, v in enumerate(items))


def _rule(raw: object, i: int) -> Rule:
    path = f"rules[{i}]"
    if not isinstance(raw, Mapping):
        raise ConfigError(path, "a rule must be a mapping")
    for key in raw:
        if key not in _RULE_KEYS:
            raise ConfigError(f"{path}.{key}", f"unknown key (known: {', '.join(sorted(_RULE_KEYS))})")
    if "cause" not in raw:
        raise ConfigError(f"{path}.cause", "is required")
    if "action" not in raw:
        raise ConfigError(f"{path}.action", "is required")
    name = raw.get("name", path)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}.name", "must be a non-empty string")
    causes = _set(raw["cause"], f"{path}.cause", Cause)
    states = _set(raw["state"], f"{path}.state", State) if "state" in raw else frozenset()
    codes: frozenset[int] = frozenset()
    if "exitCodes" in raw:
        codes_raw = raw["exitCodes"]
        if not isinstance(codes_raw, list) or not all(
            isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255 for c in codes_raw
        ):
            raise ConfigError(f"{path}.exitCodes", "must be a list of exit codes from 0 to 255")
        codes = frozenset(codes_raw)
    action = _enum(RuleAction, raw["action"], f"{path}.action")
    max_exec = _count(raw.get("maxExecutions"), f"{path}.maxExecutions")
    limit = _count(raw.get("limit"), f"{path}.limit")
    backoff = parse_duration(raw.get("backoff", 0), f"{path}.backoff")
    backoff_max = parse_duration(raw.get("backoffMax", 3600), f"{path}.backoffMax")
    exclude = raw.get("excludeBlamedNodes", False)
    if not isinstance(exclude, bool):
        raise ConfigError(f"{path}.excludeBlamedNodes", f"must be true or false, got {exclude!r}")
    if exclude and action not in _NEW_SUBMISSION_ACTIONS:
        raise ConfigError(
            f"{path}.excludeBlamedNodes",
            f"only a resubmit or hold rule makes a new submission that can avoid nodes, not {action.value}",
        )
    stalled_after = None
    if "stalledAfter" in raw:
        if Cause.STALLED not in causes:
            raise ConfigError(f"{path}.stalledAfter", "only a rule whose cause includes stalled judges stalls")
        stalled_after = parse_duration(raw["stalledAfter"], f"{path}.stalledAfter")
        if stalled_after <= 0:
            raise ConfigError(f"{path}.stalledAfter", f"must be longer than zero, got {raw['stalledAfter']!r}")
    elif Cause.STALLED in causes:
        raise ConfigError(f"{path}.stalledAfter", "is required on a rule whose cause includes stalled")
    return Rule(
        name,
        causes,
        action,
        states,
        codes,
        max_exec,
        limit,
        backoff,
        backoff_max,
        exclude_blamed_nodes=exclude,
        stalled_after=stalled_after,
    )

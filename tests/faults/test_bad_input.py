"""The bad-input campaign: fuzzed settings, rules files, job specs and scheduler output.

Every piece of bad input must end in a clear, typed error (ConfigError / SpecError naming the key or field,
Unavailable for unusable scheduler output), never in a crash with some other exception, and never in a guessed
success. Adapters are taken from the registry: every built-in adapter is fuzzed.
"""

from __future__ import annotations

import json
import math
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dispatch.clock import FakeClock
from dispatch.cluster import new_backend
from dispatch.errors import ConfigError, SpecError, Unavailable
from dispatch.registry import BUILTIN, adapter, registered
from dispatch.rules import RuleSet
from dispatch.settings import decode, encode
from dispatch.spec import JobSpec

ADAPTERS = sorted(BUILTIN)
"""Every built-in adapter: the dev extra installs them all, so one that does not import fails its tests."""

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
json_data = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


def _settings_keys(name: str) -> list[str]:
    info = adapter(name)
    if info.settings is None:
        return []
    return sorted(json.loads(json.dumps(encode(info.settings()))) if _has_defaults(info.settings) else [])


def _has_defaults(cls: type) -> bool:
    try:
        cls()
    except Exception:
        return False
    return True


def test_every_builtin_adapter_registers_under_its_name() -> None:
    """The names the campaign fuzzes resolve to registered adapters with strict settings; others are refused."""
    for name in ADAPTERS:
        info = adapter(name)
        assert info.name == name and info.settings is not None, name
    assert set(ADAPTERS) <= set(registered())
    with pytest.raises(ConfigError, match="no adapter named 'nope' \\(known: ") as err:
        adapter("nope")
    known = str(err.value).split("(known: ", 1)[1]
    assert all(name in known for name in ADAPTERS), known


@pytest.mark.parametrize("name", ADAPTERS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_settings_give_a_config_error_naming_the_key(name: str, data: st.DataObject) -> None:
    info = adapter(name)
    assert info.settings is not None, f"adapter {name} declares no settings dataclass"
    keys = _settings_keys(name)
    # half the time: the adapter's own keys with wrong values; otherwise anything at all
    if keys and data.draw(st.booleans()):
        value: Any = data.draw(st.dictionaries(st.sampled_from(keys), json_data, min_size=1, max_size=3))
    else:
        value = data.draw(json_data | st.text(max_size=40))
    try:
        decoded = decode(info.settings, value, path="")
    except ConfigError as exc:
        assert exc.message, "a ConfigError must say what is wrong"
        if isinstance(value, dict) and exc.path:
            top = exc.path.split(".")[0].split("[")[0]
            named = exc.path in value or top in value or top in keys  # an unknown key is named verbatim
            assert named, f"{exc.path!r} names neither an input key nor a setting"
        return
    # what decoded must encode back to a form that decodes to the same settings
    assert decode(info.settings, encode(decoded), path="") == decoded


@settings(max_examples=100, deadline=None)
@given(value=st.dictionaries(st.sampled_from(["nodes", "minJobAge", "callBound", "shape", "cluster"]), json_data))
def test_memory_backend_opens_or_refuses_clearly(value: dict[str, Any]) -> None:
    value = {**value, "cluster": f"fuzz-{abs(hash(json.dumps(value, default=str))) % 1000}"}
    try:
        b = new_backend("memory", value, clock=FakeClock())
    except ConfigError as exc:
        assert exc.path in value or exc.path == "", exc
        return
    b.close()


# ----- rules files --------------------------------------------------------------------------------------------

GOOD_TOML = """
unmatched = "escalate"
[limits]
total = 20
[[rules]]
name = "preemption"
cause = ["preempted", "node-lost"]
action = "resubmit"
limit = 5
"""


@pytest.mark.parametrize("cut", [1, 10, 40, 80, len(GOOD_TOML) - 8])
def test_truncated_toml_rules_name_the_file(tmp_path: Path, cut: int) -> None:
    p = tmp_path / "rules.toml"
    p.write_text(GOOD_TOML[:cut])
    try:
        RuleSet.load(p)
    except ConfigError as exc:
        assert str(p) in str(exc) or exc.path, exc
    # a prefix that happens to be valid TOML must still be a valid rule set (it loaded)


@pytest.mark.parametrize(
    ("suffix", "text", "needle"),
    [
        (".json", '{"rules": [{"cause": "preempted", "action": "resubmit"}', "not valid JSON"),
        (".json", "", "not valid JSON"),
        (".yaml", "rules: [ {cause: preempted", "not valid YAML"),
        (".yaml", "- just\n- a list\n", "rules must be a mapping"),
        (".toml", "rules = 3", "must be a list"),
        (".json", '{"rules": [{"cause": "teleported", "action": "resubmit"}]}', "rules[0].cause"),
        (".json", '{"rules": [{"cause": "preempted", "action": "pray"}]}', "rules[0].action"),
        (".json", '{"rules": [{"cause": "exit", "exitCodes": [300], "action": "resubmit"}]}', "rules[0].exitCodes"),
        (".json", '{"limits": {"total": -1}}', "limits.total"),
        (".txt", "whatever", "ends in .toml"),
        (".json", "\x00\xff\xfe garbage", "not valid JSON"),
    ],
)
def test_bad_rules_files_name_the_problem(tmp_path: Path, suffix: str, text: str, needle: str) -> None:
    p = tmp_path / f"rules{suffix}"
    p.write_text(text, encoding="utf-8", errors="surrogateescape")
    with pytest.raises(ConfigError) as info:
        RuleSet.load(p)
    assert needle in str(info.value), str(info.value)


def test_a_missing_rules_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read rules file"):
        RuleSet.load(tmp_path / "nope.toml")


def test_binary_rules_file_is_a_config_error(tmp_path: Path) -> None:
    p = tmp_path / "rules.toml"
    p.write_bytes(b"\xff\xfe\x00\x01" * 100)
    with pytest.raises(ConfigError):
        RuleSet.load(p)


def test_huge_rules_file_loads_or_refuses_clearly(tmp_path: Path) -> None:
    rules = [{"name": f"r{i}", "cause": "preempted", "action": "resubmit"} for i in range(20_000)]
    p = tmp_path / "rules.json"
    p.write_text(json.dumps({"rules": rules}))
    assert len(RuleSet.load(p).rules) == 20_000
    rules.append({"name": "r7", "cause": "exit", "action": "resubmit"})
    p.write_text(json.dumps({"rules": rules}))
    with pytest.raises(ConfigError, match=r"rules\[20000\]\.name"):
        RuleSet.load(p)


# ----- job specs ----------------------------------------------------------------------------------------------

spec_keys = st.sampled_from(
    ["command", "nodes", "procsPerNode", "workingDir", "env", "timeLimit", "name", "extensions", "bogus"]
)
nasty_text = st.text(alphabet=string.printable + "\x00\n\u202e\u00e9", max_size=30)


@settings(max_examples=300, deadline=None)
@given(
    value=st.dictionaries(spec_keys, json_data | nasty_text | st.lists(nasty_text, max_size=3), max_size=5) | json_data
)
def test_fuzzed_job_specs_give_a_spec_error_naming_the_field(value: Any) -> None:
    try:
        spec = JobSpec.from_json(value)
    except SpecError as exc:
        assert exc.message
        if isinstance(value, dict) and exc.path:
            field = exc.path.split(".")[0].split("[")[0]
            assert exc.path in value or field in value or field in ("command",), exc
        return
    assert JobSpec.from_json(spec.to_json()) == spec
    assert spec.nodes >= 1 and spec.command and all("\x00" not in a for a in spec.command)
    if spec.time_limit is not None:
        assert math.isfinite(spec.time_limit) and spec.time_limit > 0


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"command": "rm -rf /"}, "command"),
        ({"command": ()}, "command"),
        ({"command": ("a\x00b",)}, "command[0]"),
        ({"command": ("x",), "nodes": 0}, "nodes"),
        ({"command": ("x",), "nodes": True}, "nodes"),
        ({"command": ("x",), "env": {"A B": "1"}}, "env.A B"),
        ({"command": ("x",), "time_limit": math.inf}, "timeLimit"),
        ({"command": ("x",), "name": "a\nb"}, "name"),
        ({"command": ("x",), "working_dir": "relative"}, "workingDir"),
    ],
)
def test_bad_job_specs_name_the_field(kwargs: dict[str, Any], path: str) -> None:
    with pytest.raises(SpecError) as info:
        JobSpec(**kwargs)
    assert info.value.path == path


# ----- scheduler output ---------------------------------------------------------------------------------------

GARBAGE_OUTPUTS = [
    "",
    "\n",
    "{",
    '{"jobs": [',
    '{"jobs": [{"job_id": 1, "job_state": "RUNNING"',
    '{"jobs": "not a list"}',
    '{"jobs": [{"job_id": "x", "job_state": ["TELEPORTED"]}]}',
    '{"meta": {}, "jobs": [{"job_id": 7, "job_state": ["WEIRD_NEW_STATE"], "comment": "dsp-j-1"}]}',
    "null",
    "[]",
    "\x00\xff garbage",
    "slurm_load_jobs error: Socket timed out on send/recv operation",
    '{"jobs": [' + ",".join(['{"job_id": 1}'] * 50_000) + "]}",
    "x" * 5_000_000,
]


def _parser_cases() -> list[Any]:
    """Every ``parse_*`` function of every adapter package on this branch that takes the scheduler's text alone."""
    import importlib
    import inspect
    import pkgutil

    cases: list[Any] = []
    for package in ("dispatch.slurm",):
        try:
            pkg = importlib.import_module(package)
        except ImportError:
            continue
        for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{package}."):
            module = importlib.import_module(info.name)
            for fname, fn in sorted(vars(module).items()):
                if not (fname.startswith("parse_") and inspect.isfunction(fn) and fn.__module__ == info.name):
                    continue
                required = [
                    p
                    for p in inspect.signature(fn).parameters.values()
                    if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                ]
                if len(required) == 1:
                    cases.append(pytest.param(fn, id=f"{info.name}.{fname}"))
    return cases


PARSERS = _parser_cases()


@pytest.mark.parametrize("parser", PARSERS or [pytest.param(None, id="no-parsers-on-this-branch")])
@pytest.mark.parametrize("text", GARBAGE_OUTPUTS, ids=lambda t: f"{len(t)}:{t[:20]!r}")
def test_garbage_scheduler_output_is_unavailable_or_unknown(parser: Any, text: str) -> None:
    if parser is None:
        pytest.fail("no scheduler-output parser found: dispatch.slurm must provide its parsers")
    try:
        parsed = parser(text)
    except (Unavailable, ConfigError, ValueError) as exc:
        # a parser's own typed error (the Slurm adapter's ParseError, a ValueError) is turned into Unavailable or
        # OutcomeUnknown by its backend: test_garbage_through_the_slurm_backend checks that side
        assert isinstance(exc, Unavailable | ConfigError) or type(exc).__name__ == "ParseError", repr(exc)
        assert str(exc)
        assert len(str(exc)) < 2_000, "an error must not carry the whole output"
        return
    # whatever parsed must never claim success from garbage
    from dispatch.outcome import State

    blob = repr(parsed)
    assert State.SUCCEEDED.value not in blob or "COMPLETED" in text


# ----- a supervisor keeps running through garbage ---------------------------------------------------------------


class GarbageOnce:
    """A memory backend whose batched read answers garbage on chosen cycles: unusable output (Unavailable, as a
    parser raises it), or evidence whose outcome is unknown (a state the parser did not recognise)."""

    def __init__(self, inner: Any, plan: list[str]) -> None:
        self._inner = inner
        self.plan = plan  # one entry per inspect_many call: "ok", "unavailable", "unknown"

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def inspect_many(self, ids: Any) -> Any:
        mode = self.plan.pop(0) if self.plan else "ok"
        if mode == "unavailable":
            raise Unavailable("squeue --json: output is not JSON (truncated at byte 4096)")
        real = self._inner.inspect_many(ids)
        if mode == "unknown":
            import dataclasses as dc

            from dispatch.outcome import Cause, Evidence, Outcome, State

            now = self._inner.scheduler.clock.now() if hasattr(self._inner, "scheduler") else 0.0
            unknown = Outcome(State.UNKNOWN, Cause.UNKNOWN, Evidence("garbage", now), detail="state 'TELEPORTED'")
            return {k: dc.replace(v, outcome=unknown, executions=()) for k, v in real.items()}
        return real


def test_a_supervisor_keeps_running_through_garbage_evidence() -> None:
    from dispatch.cluster import Cluster
    from dispatch.memory import MemoryScheduler
    from dispatch.memory import backend as memory_backend
    from dispatch.outcome import Cause, State
    from dispatch.records import MemoryRecords
    from dispatch.supervise import Supervisor

    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", nodes=2)
    inner = memory_backend(sched)
    records = MemoryRecords()
    cluster = Cluster("memory", inner, records, clock)
    first_job = cluster.submit(JobSpec(command=("sleep", "25")))
    flaky = GarbageOnce(inner, ["ok", "unavailable", "unavailable"])
    sup = Supervisor(flaky, records, clock=clock, owner="sup", poll=10, cluster="memory")  # type: ignore[arg-type]

    def cycles(n: int) -> list[Any]:
        reports = []
        for _ in range(n):
            reports.append(sup.cycle())
            clock.advance(10)
        return reports

    reports = cycles(3)
    assert [r.unavailable for r in reports] == [False, True, True], "a cycle with unusable output must say so"
    job = records.get(first_job)
    assert not job.closed and job.state is not State.UNKNOWN, "a failed poll is not a job failure"
    cycles(6)
    job = records.get(first_job)
    assert job.closed and job.state is State.SUCCEEDED and job.cause is Cause.EXIT, job.to_json()

    # one read of a state nobody recognises is not an ending: the job runs on, and succeeds ...
    garbled = cluster.submit(JobSpec(command=("sleep", "25")))
    flaky.plan = ["unknown"]
    cycles(5)
    job = records.get(garbled)
    assert job.closed and job.state is State.SUCCEEDED and not job.escalations, job.to_json()
    # ... while one that stays unknown past the NodeLossWindow is an ending: unknown (escalated for a human),
    # never success
    stuck = cluster.submit(JobSpec(command=("sleep", "100000")))
    window = inner.declarations().node_loss_window
    flaky.plan = ["unknown"] * (int(window // 10) + 3)
    cycles(int(window // 10) + 3)
    job = records.get(stuck)
    assert job.state is State.UNKNOWN and job.state is not State.SUCCEEDED, job.to_json()
    assert job.escalations and job.escalations[0].cause is Cause.UNKNOWN, job.to_json()
    # ... and the next job is supervised as usual
    after = cluster.submit(JobSpec(command=("sleep", "25")))
    cycles(8)
    job = records.get(after)
    assert job.closed and job.state is State.SUCCEEDED, job.to_json()


def _slurm_kit() -> Any:
    try:
        import dispatch.slurm as slurm
        import dispatch.slurmtest as kit
    except ImportError as exc:
        pytest.fail(f"the Slurm adapter does not import: {exc}")
    return slurm, kit


BACKEND_GARBAGE = [t for t in GARBAGE_OUTPUTS if t.strip() not in ("", "{}")]


def _garbage_read(release: str, *exchanges: Any) -> None:
    """A read whose scheduler answers end in ``exchanges``: Unavailable with a short message, never a
    ParseError, never an outcome."""
    slurm, kit = _slurm_kit()
    now = 1_800_000_000.0
    ex = kit.TranscriptExecutor([*kit.ready_preflight(release, now=now), *exchanges])
    b = slurm.new({}, executor=ex, clock=FakeClock(now))
    with pytest.raises(Unavailable) as info:
        b.inspect_many(["7"])
    assert len(str(info.value)) < 2_000, "an error must not carry the whole output"


@pytest.mark.parametrize("release", ["22.05.8", "26.05.5"])
@pytest.mark.parametrize("text", BACKEND_GARBAGE, ids=lambda t: f"{len(t)}:{t[:20]!r}")
def test_garbage_text_squeue_through_the_slurm_backend_is_unavailable(release: str, text: str) -> None:
    """The cheap text listing answers garbage (exit status 0)."""
    _, kit = _slurm_kit()
    _garbage_read(release, kit.Exchange("JobArrayID:|,State", kit.wrapped(kit.ok(text))))


@pytest.mark.parametrize("release", ["22.05.8", "26.05.5"])
@pytest.mark.parametrize("text", BACKEND_GARBAGE, ids=lambda t: f"{len(t)}:{t[:20]!r}")
def test_garbage_json_squeue_through_the_slurm_backend_is_unavailable(release: str, text: str) -> None:
    """The text listing does not settle a requeued running job, so JSON is asked for, and answers garbage."""
    _, kit = _slurm_kit()
    live = kit.Job(7, "dsp-j-1", "RUNNING", restarts=1, start=1_800_000_000 - 5)
    _garbage_read(
        release,
        kit.Exchange("JobArrayID:|,State", kit.wrapped(kit.ok(kit.squeue_text(live)))),
        kit.Exchange("squeue --json", kit.wrapped(kit.ok(text))),
    )


@pytest.mark.parametrize("text", BACKEND_GARBAGE, ids=lambda t: f"{len(t)}:{t[:20]!r}")
def test_garbage_sacct_through_the_slurm_backend_is_unavailable(text: str) -> None:
    """The job left squeue and sacct answers garbage: Unavailable, never a guessed outcome."""
    _, kit = _slurm_kit()
    _garbage_read(
        "26.05.5",
        kit.Exchange("JobArrayID:|,State", kit.wrapped(kit.ok(""))),
        kit.Exchange("sacct", kit.wrapped(kit.ok(text))),
    )

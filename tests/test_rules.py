"""Rules files: three formats, errors naming the rule, limits, backoff, capability checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch import Capability, Cause, ConfigError, FakeClock, State, Unsupported
from dispatch.memory import MemoryScheduler, backend
from dispatch.rules import RuleAction, RuleSet, Unmatched

TOML = """
unmatched = "close"
[limits]
total = 5
causes = { preempted = 2 }

[[rules]]
name = "preemption"
cause = ["preempted", "node-lost"]
action = "resubmit"
limit = 3
backoff = "30s"
backoffMax = "2m"

[[rules]]
cause = "exit"
exitCodes = [75]
maxExecutions = 2
action = "requeue"
"""


def test_formats_agree(tmp_path: Path) -> None:
    (tmp_path / "r.toml").write_text(TOML)
    rs = RuleSet.load(tmp_path / "r.toml")
    import json

    import yaml

    (tmp_path / "r.json").write_text(json.dumps(rs.to_json()))
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(rs.to_json()))
    assert RuleSet.load(tmp_path / "r.json") == rs == RuleSet.load(tmp_path / "r.yaml")
    assert rs.unmatched is Unmatched.CLOSE and rs.total_limit == 5
    assert rs.rules[1].name == "rules[1]" and rs.rules[1].action is RuleAction.REQUEUE


def test_matching_limits_and_backoff() -> None:
    rs = RuleSet.from_data(
        {
            "limits": {"causes": {"preempted": 2}},
            "rules": [
                {"name": "p", "cause": "preempted", "action": "resubmit", "limit": 3, "backoff": 10, "backoffMax": 25},
                {"name": "e", "cause": "exit", "exitCodes": [75], "maxExecutions": 2, "action": "resubmit"},
            ],
        }
    )
    rule, _ = rs.find(State.FAILED, Cause.PREEMPTED, None, 1, {})
    assert rule is not None and rule.name == "p"
    assert [rule.delay(k) for k in range(4)] == [10, 20, 25, 25]
    rule, why = rs.find(State.FAILED, Cause.PREEMPTED, None, 1, {"cause:preempted": 2})
    assert rule is None and "preempted" in why
    rule, why = rs.find(State.FAILED, Cause.PREEMPTED, None, 1, {"rule:p": 3})
    assert rule is None and "limit" in why
    assert rs.find(State.FAILED, Cause.EXIT, 75, 2, {})[0] is not None
    assert rs.find(State.FAILED, Cause.EXIT, 75, 3, {})[0] is None
    assert rs.find(State.FAILED, Cause.EXIT, 1, 1, {})[0] is None
    assert rs.find(State.FAILED, Cause.OUT_OF_MEMORY, None, 1, {}) == (None, "no rule matches out-of-memory")


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"rules": [{"cause": "preempted"}]}, "rules[0].action"),
        ({"rules": [{"action": "resubmit"}]}, "rules[0].cause"),
        ({"rules": [{"cause": "preempted", "action": "reboot"}]}, "rules[0].action"),
        ({"rules": [{"cause": "zombie", "action": "resubmit"}]}, "rules[0].cause"),
        ({"rules": [{"cause": ["exit", "nope"], "action": "resubmit"}]}, "rules[0].cause[1]"),
        ({"rules": [{"cause": "exit", "action": "resubmit", "exitCodes": [300]}]}, "rules[0].exitCodes"),
        ({"rules": [{"cause": "exit", "action": "resubmit", "backoff": "later"}]}, "rules[0].backoff"),
        ({"rules": [{"cause": "exit", "action": "resubmit", "colour": "red"}]}, "rules[0].colour"),
        (
            {
                "rules": [
                    {"name": "a", "cause": "exit", "action": "resubmit"},
                    {"name": "a", "cause": "timeout", "action": "resubmit"},
                ]
            },
            "rules[1].name",
        ),
        ({"limits": {"total": -1}}, "limits.total"),
        ({"limits": {"causes": {"bogus": 1}}}, "limits.causes.bogus"),
        ({"unmatched": "panic"}, "unmatched"),
        ({"rulez": []}, "rulez"),
    ],
)
def test_errors_name_the_rule(data: object, path: str) -> None:
    with pytest.raises(ConfigError) as err:
        RuleSet.from_data(data)
    assert err.value.path == path


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        RuleSet.load(tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text("rules = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        RuleSet.load(tmp_path / "bad.toml")
    (tmp_path / "r.txt").write_text("")
    with pytest.raises(ConfigError, match="ends in"):
        RuleSet.load(tmp_path / "r.txt")


def test_actions_checked_against_the_cluster() -> None:
    clock = FakeClock()
    kube = backend(MemoryScheduler(clock, "kubeflow"))
    rs = RuleSet.from_data({"rules": [{"name": "rq", "cause": "preempted", "action": "requeue"}]})
    with pytest.raises(ConfigError, match="rq.*requeue is no") as err:
        rs.check_against(kube, kube.capabilities())
    assert err.value.path == "rules[0]"
    slurm = backend(MemoryScheduler(clock, "slurm"))
    rs.check_against(slurm, slurm.capabilities())
    restart = RuleSet.from_data({"rules": [{"cause": "exit", "action": "restart"}]})
    with pytest.raises(Unsupported, match=r"^rules\[0\]: action restart is refused.*(NativeRestart|native)"):
        restart.check_against(slurm, slurm.capabilities())
    native = backend(MemoryScheduler(clock, "slurm", native_restart=True))
    restart.check_against(native, native.capabilities())
    ro = backend(MemoryScheduler(clock, "kubeflow"), read_only=True)
    with pytest.raises(ConfigError, match="hold is unknown"):
        RuleSet.from_data({"rules": [{"cause": "exit", "action": "hold"}]}).check_against(ro, ro.capabilities())


_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 300)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["preempted", "exit", "resubmit", "hold", "30s", "escalate", "close"]),
    lambda c: (
        st.lists(c, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "cause",
                    "action",
                    "limit",
                    "name",
                    "exitCodes",
                    "backoff",
                    "state",
                    "total",
                    "causes",
                    "maxExecutions",
                    "junk",
                ]
            ),
            c,
            max_size=5,
        )
    ),
    max_leaves=15,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(["unmatched", "limits", "rules", "other"]), _values, max_size=3))
def test_fuzzed_rules_give_config_errors_only(data: dict[str, object]) -> None:
    try:
        rs = RuleSet.from_data(data)
    except ConfigError as exc:
        assert str(exc)
    else:
        assert RuleSet.from_data(rs.to_json()) == rs


def test_a_restart_rule_nothing_carries_out_is_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    """Every built-in scheduler adapter without a native policy refuses ``restart`` with Unsupported and why."""
    import dispatch
    from dispatch.records import MemoryRecords

    store = MemoryRecords()
    rules = {"rules": [{"name": "again", "cause": "exit", "action": "restart"}]}
    opens = (("local", {"stateDir": str(tmp_path / "local")}), ("memory", {"cluster": "t-restart"}))
    for name, adapter_settings in opens:
        with dispatch.open(name, adapter=adapter_settings, records=store) as cluster:
            reason = cluster.capabilities()[Capability.NATIVE_RESTART].reason
            refused = r"rules\[0\] \(rule 'again'\): action restart is refused on this cluster: .+"
            with pytest.raises(Unsupported, match=refused) as err:
                cluster.submit(dispatch.JobSpec(command=("true",)), rules=rules)
            assert str(err.value).endswith(reason), "the Reason of the cluster's answer is given"
    assert store.jobs(active_only=False) == [], "nothing was recorded"


def test_a_restart_rule_is_accepted_where_the_backend_compiles_it() -> None:
    clock = FakeClock()
    native = backend(MemoryScheduler(clock, "slurm", native_restart=True))
    rule = RuleSet.from_data({"rules": [{"cause": "exit", "action": "restart"}]}).rules[0]
    assert native.compile_policy([rule.to_json()]).native, "the memory scheduler's policy takes the rule"
    RuleSet.from_data({"rules": [rule.to_json()]}).check_against(native, native.capabilities())


def test_a_readmit_rule_is_accepted_only_where_a_readmitter_meets_a_readmission_gate(tmp_path: Path) -> None:
    """``readmit`` needs a Readmitter and ReadmissionGate yes; elsewhere it is Unsupported, with the reason,
    before anything is recorded (as ``restart`` is)."""
    import dispatch
    from dispatch.records import MemoryRecords
    from dispatch.spi import Readmitter, restrict

    clock = FakeClock()
    rules = {"rules": [{"name": "back", "cause": "preempted", "action": "readmit"}]}
    kube = backend(MemoryScheduler(clock, "kubeflow"))
    assert isinstance(kube, Readmitter)
    RuleSet.from_data(rules).check_against(kube, kube.capabilities())
    without = restrict(kube, (Readmitter,))
    with pytest.raises(Unsupported, match=r"^rules\[0\] \(rule 'back'\): action readmit is refused.*no Readmitter"):
        RuleSet.from_data(rules).check_against(without, without.capabilities())
    store = MemoryRecords()
    opens = (("local", {"stateDir": str(tmp_path / "local")}), ("memory", {"cluster": "t-readmit"}))
    for name, adapter_settings in opens:
        with dispatch.open(name, adapter=adapter_settings, records=store) as cluster:
            assert not isinstance(cluster.backend, Readmitter)
            with pytest.raises(Unsupported, match=r"action readmit is refused on this cluster: .*use resubmit"):
                cluster.submit(dispatch.JobSpec(command=("true",)), rules=rules)
    assert store.jobs(active_only=False) == [], "nothing was recorded"


def test_a_readmit_rule_is_refused_where_the_readmission_gate_is_not_yes() -> None:
    from dispatch.capabilities import Capabilities, no

    kube = backend(MemoryScheduler(FakeClock(), "kubeflow"))
    caps = dict(kube.capabilities())
    caps[Capability.READMISSION_GATE] = no("not proven: no AdmissionCheck of dispatch-admission")
    rs = RuleSet.from_data({"rules": [{"cause": "preempted", "action": "readmit"}]})
    with pytest.raises(Unsupported, match=r"ReadmissionGate is no: not proven"):
        rs.check_against(kube, Capabilities(caps))
    assert rs.rules[0].action is RuleAction.READMIT and rs.to_json()["rules"][0]["action"] == "readmit"


def test_the_kueue_example_rules_readmit_where_a_readmitter_is_and_are_refused_elsewhere() -> None:
    rules = RuleSet.load(Path(__file__).resolve().parents[1] / "examples" / "rules" / "kueue-preemption.yaml")
    assert [r.action for r in rules.rules][:2] == [RuleAction.READMIT, RuleAction.RESUBMIT]
    clock = FakeClock()
    kube = backend(MemoryScheduler(clock, "kubeflow"))
    rules.check_against(kube, kube.capabilities())
    slurm = backend(MemoryScheduler(clock, "slurm"))
    with pytest.raises(Unsupported, match="rule 'readmit-preempted'"):
        rules.check_against(slurm, slurm.capabilities())

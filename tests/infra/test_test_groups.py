"""scripts/test-groups.py's selection: every test runs in exactly one group, whatever markers it carries.

The groups' marker expressions are evaluated by pytest's own evaluator (the one ``pytest -m`` uses), for every
combination of the markers that bind a test to a daemon; the folder groups and ``rest`` share one expression and
split the tests by path, so they count as one here.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import tomllib
from pathlib import Path
from types import ModuleType

from _pytest.mark.expression import Expression

ROOT = Path(__file__).resolve().parents[2]


def _groups_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("test_groups_script", ROOT / "scripts" / "test-groups.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


TG = _groups_module()
DAEMON_MARKERS = (*TG.CLUSTER_MARKERS, *TG.OWN_GROUP_MARKERS, *TG.NOT_STARTED_MARKERS)


def selecting(markers: set[str]) -> list[str]:
    """The groups whose expression selects a test carrying ``markers`` (folder groups and rest as one)."""
    no_daemon = {"rest", *(folder.removeprefix("tests/") for folder in TG.OWN_GROUP_FOLDERS)}
    names = set()
    for group in TG.groups():
        if Expression.compile(group.expression).evaluate(lambda name, **_: name in markers):
            names.add("no-daemon" if group.name in no_daemon else group.name)
    return sorted(names)


def test_every_combination_of_daemon_markers_runs_in_exactly_one_group() -> None:
    for r in range(len(DAEMON_MARKERS) + 1):
        for combo in itertools.combinations(DAEMON_MARKERS, r):
            markers = set(combo) | {"postgres", "training"}  # markers without a group of their own change nothing
            chosen = selecting(markers)
            if set(combo) & set(TG.NOT_STARTED_MARKERS):
                assert chosen == [], f"{combo} runs in {chosen}, but its daemon is not started"
            else:
                assert len(chosen) == 1, f"{combo} runs in {chosen or 'no group'}"


def test_the_control_plane_tests_are_a_group_of_their_own() -> None:
    assert "controlplane" not in TG.NOT_STARTED_MARKERS
    assert selecting({"controlplane"}) == ["controlplane"]
    assert selecting({"apiserver"}) == ["apiserver"]
    assert selecting(set()) == ["no-daemon"]
    # a cluster marker wins over an own-group marker, the first own-group marker over a later one
    assert selecting({"controlplane", "slurm_local"}) == ["local"]
    assert selecting({"controlplane", "apiserver"}) == ["apiserver"]
    assert selecting({"realpods"}) == ["realpods"]
    assert selecting({"realpods", "controlplane"}) == ["controlplane"]


def test_every_marker_the_groups_name_is_declared_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = {m.split(":", 1)[0] for m in config["tool"]["pytest"]["ini_options"]["markers"]}
    assert set(DAEMON_MARKERS) <= declared


def test_the_prometheus_tests_run_with_the_tests_that_need_no_shared_daemon() -> None:
    """They start prometheus processes of their own (tests/prometheus/prom.py); the test command installs the
    package first, beside the other host installs."""
    assert selecting({"prometheus"}) == ["no-daemon"]
    assert "bash scripts/prometheus-up.sh" in (ROOT / "scripts" / "test").read_text()

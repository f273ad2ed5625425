"""Property tests of the pure parts: label selectors, merge patch and the apply merge."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from dispatch_kubetest.apply import deep_merge
from dispatch_kubetest.patch import json_patch, merge_patch
from dispatch_kubetest.selectors import labels_match, parse_label_selector

KEYS = st.sampled_from(["app", "team", "example.com/tier", "kueue.x-k8s.io/queue-name"])
VALUES = st.sampled_from(["a", "b", "c-1", "x.y"])
LABELS = st.dictionaries(KEYS, VALUES, max_size=4)


@st.composite
def requirement(draw: st.DrawFn) -> tuple[str, Any]:
    key = draw(KEYS)
    op = draw(st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!"]))
    if op in ("in", "notin"):
        values = draw(st.lists(VALUES, min_size=1, max_size=3, unique=True))
        return f"{key} {op} ({', '.join(values)})", (key, op, set(values))
    if op == "exists":
        return key, (key, op, None)
    if op == "!":
        return f"!{key}", (key, op, None)
    value = draw(VALUES)
    return f"{key}{op}{value}", (key, op, value)


def _reference(labels: dict[str, str], req: tuple[str, str, Any]) -> bool:
    key, op, value = req
    if op in ("=", "=="):
        return labels.get(key) == value
    if op == "!=":
        return labels.get(key) != value
    if op == "in":
        return labels.get(key) in value
    if op == "notin":
        return labels.get(key) not in value
    if op == "exists":
        return key in labels
    return key not in labels


@given(LABELS, st.lists(requirement(), min_size=1, max_size=4))
def test_label_selector_matches_the_reference_semantics(labels: dict[str, str], reqs: list[tuple[str, Any]]) -> None:
    text = ",".join(r[0] for r in reqs)
    parsed = parse_label_selector(text)
    assert labels_match(parsed, {"metadata": {"labels": labels}}) == all(_reference(labels, r[1]) for r in reqs)


JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=3))
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=2), inner, max_size=3)),
    max_leaves=10,
)
JSON_OBJ = st.dictionaries(st.text(max_size=2), JSON_VALUE, max_size=4)


@given(JSON_OBJ, JSON_OBJ)
def test_merge_patch_is_idempotent_and_sets_every_patched_key(target: dict[str, Any], patch: dict[str, Any]) -> None:
    once = merge_patch(target, patch)
    assert merge_patch(once, patch) == once
    for key, value in patch.items():
        if value is None:
            assert key not in once
        elif not isinstance(value, dict):
            assert once[key] == value


@given(JSON_OBJ, st.text(max_size=2), JSON_VALUE)
def test_json_patch_add_then_remove_restores(target: dict[str, Any], key: str, value: Any) -> None:
    assume(key not in target)
    pointer = "/" + key.replace("~", "~0").replace("/", "~1")
    added = json_patch(target, [{"op": "add", "path": pointer, "value": value}])
    assert added[key] == value
    assert json_patch(added, [{"op": "remove", "path": pointer}]) == target


@given(JSON_OBJ, JSON_OBJ)
def test_apply_merge_keeps_base_keys_and_takes_overlay_leaves(base: dict[str, Any], overlay: dict[str, Any]) -> None:
    merged = deep_merge(base, overlay)
    assert set(base) | set(overlay) == set(merged)
    assert deep_merge(merged, overlay) == merged

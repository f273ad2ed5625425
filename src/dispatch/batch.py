"""Many job specs from one file, for :meth:`dispatch.cluster.Operator.submit_many` (``dispatch submit --from``).

Two forms, told apart by their content:

* **JSON lines**: one JobSpec (its JSON form, :meth:`JobSpec.from_json`) per line; blank lines and lines
  starting with ``#`` are skipped.
* **A parameter sweep**: one JSON object ``{"sweep": {NAME: [VALUE, ...], ...}, "spec": {...}}``. The spec is
  a JobSpec's JSON in which ``{NAME}`` stands for a value; one spec is made per combination of the values
  (the cartesian product, in the order the names and values are written). Every string of the spec is
  substituted (argv words, env values, name, working directory, extension fields); a ``{...}`` that names no
  sweep parameter is left as it is. Each value is substituted as one string (``0.1``, ``3``, ``"adam"``), so
  an argv word stays one argv word whatever the value holds.

Errors name the file, the line (JSON lines) or the combination (sweep), and the field.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

from dispatch.errors import SpecError
from dispatch.spec import JobSpec

MAX_JOBS = 10_000
"""The most specs one file may describe (a typo in a sweep must not submit a million jobs)."""


def load_specs(text: str, source: str = "FILE") -> list[JobSpec]:
    """The specs ``text`` describes (see the module docstring). Raises SpecError naming where it is wrong."""
    stripped = text.strip()
    if not stripped:
        raise SpecError(source, "holds no job spec")
    if stripped.startswith("{"):
        try:
            doc = json.loads(stripped)
        except ValueError:
            doc = None  # several objects: JSON lines
        if isinstance(doc, Mapping) and "sweep" in doc:
            return sweep_specs(doc, source)
    specs = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise SpecError(f"{source} line {n}", f"not JSON: {exc}") from None
        specs.append(_spec(data, f"{source} line {n}"))
        if len(specs) > MAX_JOBS:
            raise SpecError(source, f"describes more than {MAX_JOBS} jobs")
    return specs


def sweep_specs(doc: Mapping[str, Any], source: str = "FILE") -> list[JobSpec]:
    """The specs of one sweep document ``{"sweep": {...}, "spec": {...}}``."""
    extra = sorted(set(doc) - {"sweep", "spec"})
    if extra:
        raise SpecError(f"{source}: {extra[0]}", "unknown field of a sweep (known: spec, sweep)")
    params = doc.get("sweep")
    template = doc.get("spec")
    if not isinstance(params, Mapping) or not params:
        raise SpecError(f"{source}: sweep", "must be an object of parameter names to lists of values")
    if not isinstance(template, Mapping):
        raise SpecError(f"{source}: spec", "must be a job spec object")
    names = list(params)
    for name in names:
        values = params[name]
        if not isinstance(values, list) or not values:
            raise SpecError(f"{source}: sweep.{name}", "must be a non-empty list of values")
        for v in values:
            if isinstance(v, dict | list) or v is None:
                raise SpecError(f"{source}: sweep.{name}", "values must be strings, numbers or booleans")
    total = 1
    for name in names:
        total *= len(params[name])
    if total > MAX_JOBS:
        raise SpecError(f"{source}: sweep", f"makes {total} jobs, more than {MAX_JOBS}")
    specs = []
    for combo in itertools.product(*(params[n] for n in names)):
        values = {n: _text(v) for n, v in zip(names, combo, strict=True)}
        where = ", ".join(f"{k}={v}" for k, v in values.items())
        specs.append(_spec(_substitute(template, values), f"{source} ({where})"))
    return specs


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _substitute(value: Any, values: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        for name, text in values.items():
            value = value.replace("{" + name + "}", text)
        return value
    if isinstance(value, list):
        return [_substitute(v, values) for v in value]
    if isinstance(value, Mapping):
        return {k: _substitute(v, values) for k, v in value.items()}
    return value


def _spec(data: Any, where: str) -> JobSpec:
    try:
        return JobSpec.from_json(data)
    except SpecError as exc:
        raise SpecError(f"{where}: {exc.path}" if exc.path else where, exc.message) from None

"""submitit's parameters, by submitit's own names, read into what a dispatch job asks for: :func:`request_of`.

submitit's ``update_parameters`` takes shared names (``timeout_min``, ``nodes``, ``tasks_per_node``,
``gpus_per_node``, ``cpus_per_task``, ``mem_gb``, ``name``, ``stderr_to_stdout``) and names prefixed by the
executor they are for (``slurm_partition``, ``slurm_time``, ``local_setup``; ``slurm_timeout_min`` is a shared
name for Slurm alone). As in submitit, a prefixed name wins over the shared one on its own cluster, and a name
prefixed for another executor is checked and left to that one (:attr:`Request.elsewhere`).

Every name is either carried into the job (its resources, time limit, name, setup lines, ``slurm.Placement``) or
refused with a :class:`~dispatch.errors.ConfigError` naming it: a parameter dispatch cannot honour is never
dropped. A parameter given the value that asks for nothing (``stderr_to_stdout=False``, ``use_srun=True``, an
empty ``srun_args``) is accepted, since dispatch does what it asks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatch.errors import ConfigError, SpecError
from dispatch.extensions import Extension
from dispatch.resources import Resources, parse_memory

SHARED = (
    "name",
    "timeout_min",
    "mem_gb",
    "nodes",
    "cpus_per_task",
    "gpus_per_node",
    "tasks_per_node",
    "stderr_to_stdout",
)
"""submitit's shared parameters (its AutoExecutor's typed parameters)."""

EXECUTORS = ("slurm", "local", "debug")
"""The executors submitit knows, hence the prefixes of its executor-specific parameters."""

DEFAULT_TIMEOUT_MIN = 5
"""submitit's time limit when none is given (its Slurm executor's ``time``): 5 minutes."""

SLURM_CARRIED = frozenset(
    {
        "job_name",
        "partition",
        "time",
        "nodes",
        "ntasks_per_node",
        "cpus_per_task",
        "gpus_per_node",
        "num_gpus",
        "qos",
        "account",
        "constraint",
        "exclude",
        "nodelist",
        "mem",
        "gres",
        "exclusive",
        "array_parallelism",
        "additional_parameters",
        "setup",
    }
)
"""submitit's Slurm parameters that dispatch carries (``reservation`` too, through ``additional_parameters``)."""

LOCAL_CARRIED = frozenset({"setup"})
"""submitit's local parameters dispatch carries."""

_SLURM_REFUSED = {
    "teardown": "dispatch runs no shell lines after the job",
    "signal_delay_s": "dispatch asks a Checkpointable for its checkpoint on SIGTERM, which Slurm sends at the time"
    " limit and on preemption, with KillWait (30 s by default) before SIGKILL; no earlier signal is sent",
    "srun_args": "dispatch builds the srun line itself",
    "use_srun": "dispatch always launches the ranks with srun",
    "stderr_to_stdout": "dispatch keeps every rank's stdout and stderr apart",
    "cpus_per_gpu": "a job asks CPUs per task (cpus_per_task), not per GPU",
    "gpus_per_task": "a job asks GPUs per node (gpus_per_node)",
    "mem_per_gpu": "a job asks memory per node (mem_gb, slurm_mem)",
    "mem_per_cpu": "a job asks memory per node (mem_gb, slurm_mem)",
    "comment": "dispatch sets no job comment",
    "wckey": "dispatch sets no workload characterisation key",
    "mail_type": "dispatch sends no mail (follow jobs with `dispatch status` or the dashboard)",
    "mail_user": "dispatch sends no mail (follow jobs with `dispatch status` or the dashboard)",
    "dependency": "dispatch submits no dependencies between jobs (wait for a job's result, then submit)",
    "map_count": "it is submitit's own, set by map_array",
}
"""submitit's Slurm parameters that dispatch does not carry, and why."""

_LOCAL_REFUSED = {
    "visible_gpus": "the local adapter shares out the host's GPUs itself (its `gpus` setting)",
    "signal_delay_s": "dispatch asks a Checkpointable for its checkpoint on SIGTERM (the time limit), with the"
    " local adapter's `grace` before SIGKILL",
}

_CARRIED = {"slurm": SLURM_CARRIED, "local": LOCAL_CARRIED}
_REFUSED = {"slurm": _SLURM_REFUSED, "local": _LOCAL_REFUSED}

_INERT: dict[str, Any] = {"stderr_to_stdout": False, "use_srun": True}
"""Parameters whose value here asks for what dispatch does anyway."""

_ADDITIONAL = {
    "partition",
    "account",
    "qos",
    "reservation",
    "constraint",
    "exclude",
    "nodelist",
    "mem",
    "gres",
    "exclusive",
    "time",
    "job_name",
    "nodes",
    "ntasks_per_node",
    "cpus_per_task",
    "gpus_per_node",
}
"""The sbatch options ``slurm_additional_parameters`` may name (``-`` and ``_`` alike)."""

PLACEMENT = ("partition", "account", "qos", "reservation", "constraint", "exclude", "nodelist")
"""The Slurm parameters carried by the ``slurm.Placement`` extension."""

_GRES = re.compile(r"gpu(?::([A-Za-z0-9][A-Za-z0-9_.+-]*))?:([0-9]+)")
_SLURM_TIME = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")


@dataclass(frozen=True)
class Request:
    """What the parameters ask of every job: its shape, time limit, name and Slurm placement; the array
    throttle (``slurm_array_parallelism``), carried as each batch's ``max_running``; and the parameters left to another
    executor than this cluster's (``elsewhere``)."""

    nodes: int = 1
    tasks_per_node: int = 1
    resources: Resources = field(default_factory=Resources)
    time_limit: float = DEFAULT_TIMEOUT_MIN * 60.0
    name: str | None = None
    setup: tuple[str, ...] = ()
    placement: Mapping[str, str] = field(default_factory=dict)
    array_parallelism: int | None = None
    elsewhere: tuple[str, ...] = ()

    @property
    def world_size(self) -> int:
        return self.nodes * self.tasks_per_node

    def extensions(self) -> tuple[Extension, ...]:
        """The job's extensions: ``slurm.Placement`` when a placement was asked."""
        if not self.placement:
            return ()
        from dispatch.slurm.extensions import Placement

        try:
            return (Placement(**self.placement),)
        except SpecError as exc:
            raise ConfigError(f"slurm_{exc.path}", exc.message) from None


def request_of(parameters: Mapping[str, Any], executor: str) -> Request:
    """Read submitit ``parameters`` (None values are not set, as in submitit) for a cluster whose submitit
    executor name is ``executor`` (its adapter's name: ``slurm``, ``local``, ...). ConfigError naming the first
    parameter that is unknown, of the wrong type, or not carried (and why)."""
    given = {k: v for k, v in parameters.items() if v is not None}
    asked: dict[str, Any] = {}
    elsewhere: list[str] = []
    for key, value in given.items():
        if key in SHARED:
            asked.setdefault(key, (key, value))
    for key, value in given.items():
        if key in SHARED:
            continue
        prefix, _, rest = key.partition("_")
        if prefix not in EXECUTORS or not rest:
            raise ConfigError(
                key,
                f"is no submitit parameter: the shared ones are {', '.join(SHARED)}; the others are named for"
                f" their executor ({', '.join(p + '_' for p in EXECUTORS)}, e.g. slurm_partition)",
            )
        _check_known(key, prefix, rest, value)
        if prefix != executor:
            elsewhere.append(key)
            continue
        if rest in SHARED:
            asked[rest] = (key, value)  # the cluster's own value of a shared parameter wins
        elif rest not in _CARRIED.get(prefix, frozenset()):
            continue  # a parameter dispatch does not carry, given the value that asks for nothing (checked)
        elif rest == "additional_parameters":
            for option, option_value in _additional(key, value).items():
                asked[option] = (f"{key}[{option!r}]", option_value)
        else:
            asked[rest] = (key, value)
    return _request(asked, tuple(elsewhere))


_FIELD = {
    "timeout_min": "time limit",
    "time": "time limit",
    "name": "name",
    "job_name": "name",
    "nodes": "nodes",
    "tasks_per_node": "tasks per node",
    "ntasks_per_node": "tasks per node",
    "gpus_per_node": "GPUs",
    "num_gpus": "GPUs",
    "gres": "GPUs",
    "mem_gb": "memory",
    "mem": "memory",
}
"""What the parameters that several names can set set (the others set what their own name says)."""


def _fields(key: str, value: Any) -> tuple[str, set[str]]:
    """The executor parameter ``key`` is for (``""``: shared) and what it sets (for ``*_additional_parameters``,
    what each of its options sets)."""
    prefix, _, rest = key.partition("_")
    if key in SHARED or prefix not in EXECUTORS:
        return "", {_FIELD.get(key, key)}
    if rest == "additional_parameters" and isinstance(value, Mapping):
        return prefix, {_option_field(o) for o in value}
    return prefix, {_FIELD.get(rest, rest)}


def _option_field(option: object) -> str:
    name = str(option).replace("-", "_")
    return _FIELD.get(name, name)


def later_wins(earlier: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """``earlier`` parameters merged with ``update`` as a user means them: a parameter of ``update`` replaces
    every earlier one for the same executor (or a shared one) that sets the same thing under another name
    (``slurm_time`` after ``timeout_min``; an option of ``slurm_additional_parameters`` after
    ``slurm_gpus_per_node``, whose options an earlier ``slurm_additional_parameters`` then loses), so a later call
    is never ignored for an earlier one's name. Within ``update`` the rules of :func:`request_of` hold."""
    updated = [_fields(k, v) for k, v in update.items() if v is not None]

    def replaced(scope: str, thing: str) -> bool:
        return any(thing in things and (s == scope or "" in (scope, s)) for s, things in updated)

    merged: dict[str, Any] = {}
    for key, value in earlier.items():
        if key in update or value is None:
            continue
        scope, things = _fields(key, value)
        if key.endswith("_additional_parameters") and isinstance(value, Mapping):
            kept = {o: v for o, v in value.items() if not replaced(scope, _option_field(o))}
            if kept:
                merged[key] = kept
        elif not any(replaced(scope, thing) for thing in things):
            merged[key] = value
    return {**merged, **update}


def _check_known(key: str, prefix: str, rest: str, value: Any) -> None:
    """ConfigError for a name submitit's executor ``prefix`` does not know, or one dispatch does not carry."""
    if rest in SHARED:
        return
    carried = _CARRIED.get(prefix, frozenset())
    if rest in carried:
        return
    refused = _REFUSED.get(prefix, {})
    if rest in refused:
        if _inert(rest, value):
            return
        raise ConfigError(key, f"is not carried by dispatch: {refused[rest]}")
    known = sorted(SHARED) + sorted(carried | set(refused))
    raise ConfigError(key, f"is no parameter of submitit's {prefix} executor (known: {', '.join(known)})")


def _inert(name: str, value: Any) -> bool:
    if name in _INERT:
        return bool(value == _INERT[name])
    return value in ((), [], {}, "")


def _additional(key: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"must be a mapping of sbatch options to values, not {type(value).__name__}")
    out: dict[str, Any] = {}
    for option, option_value in value.items():
        name = str(option).replace("-", "_")
        if name not in _ADDITIONAL:
            raise ConfigError(
                f"{key}[{option!r}]",
                f"is not carried by dispatch (the sbatch options it carries: {', '.join(sorted(_ADDITIONAL))})",
            )
        out[name] = option_value
    return out


def _request(asked: Mapping[str, tuple[str, Any]], elsewhere: tuple[str, ...]) -> Request:
    """The request from each asked parameter (by its name here, with the name the user gave it)."""
    values: dict[str, Any] = {}
    gpus: int | None = None
    gpu_type: str | None = None
    placement: dict[str, str] = {}
    for name, (key, value) in asked.items():
        if name in ("name", "job_name"):
            values["name"] = _text(key, value)
        elif name == "timeout_min":
            values["time_limit"] = _number(key, value) * 60.0
        elif name == "time":
            values["time_limit"] = _slurm_time(key, value)
        elif name == "nodes":
            values["nodes"] = _count(key, value)
        elif name in ("tasks_per_node", "ntasks_per_node"):
            values["tasks_per_node"] = _count(key, value)
        elif name in ("gpus_per_node", "num_gpus"):
            gpus = _count(key, value, minimum=0)
        elif name == "gres":
            gpus, gpu_type = _gres(key, value)
        elif name == "cpus_per_task":
            values["cpus_per_proc"] = _count(key, value)
        elif name == "mem_gb":
            values["mem_per_node"] = max(1, round(_number(key, value) * 1024))
        elif name == "mem":
            values["mem_per_node"] = _memory(key, value)
        elif name == "exclusive":
            if not isinstance(value, bool):
                raise ConfigError(key, f"dispatch carries exclusive=True or False, not {value!r}")
            values["exclusive"] = value
        elif name == "setup":
            values["setup"] = _lines(key, value)
        elif name in PLACEMENT:
            placement[name] = _text(key, value)
        elif name == "array_parallelism":
            values["array_parallelism"] = _count(key, value)
        elif name == "stderr_to_stdout":
            if value is not False:
                raise ConfigError(key, f"is not carried by dispatch: {_SLURM_REFUSED['stderr_to_stdout']}")
        else:  # pragma: no cover - every carried name is handled above
            raise ConfigError(key, "is not carried by dispatch")
    try:
        resources = Resources(
            gpus_per_node=gpus or 0,
            gpu_type=gpu_type if gpus else None,
            cpus_per_proc=values.pop("cpus_per_proc", None),
            mem_per_node=values.pop("mem_per_node", None),
            exclusive=values.pop("exclusive", False),
        )
    except SpecError as exc:
        raise ConfigError(exc.path, exc.message) from None
    return Request(resources=resources, placement=placement, elsewhere=elsewhere, **values)


def _lines(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(key, f"must be a list of shell lines, not {value!r}")
    return tuple(value)


def _text(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(key, f"must be a non-empty string, not {value!r}")
    return value


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ConfigError(key, f"must be a positive number, not {value!r}")
    return float(value)


def _count(key: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(key, f"must be a whole number of at least {minimum}, not {value!r}")
    return value


def _memory(key: str, value: Any) -> int:
    """Slurm's ``--mem``: a number (MB) or a size with a unit (``64G``, ``64GB``)."""
    try:
        return parse_memory(value, key)
    except SpecError as exc:
        raise ConfigError(key, exc.message) from None


def _gres(key: str, value: Any) -> tuple[int, str | None]:
    m = _GRES.fullmatch(value) if isinstance(value, str) else None
    if m is None:
        raise ConfigError(key, f"dispatch carries GPU requests (gpu:N or gpu:TYPE:N) only, not {value!r}")
    return int(m.group(2)), m.group(1)


def _slurm_time(key: str, value: Any) -> float:
    """Seconds from Slurm's ``--time``: minutes (a number), or ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``,
    ``D-HH:MM:SS``."""
    if not isinstance(value, str):
        return _number(key, value) * 60.0
    m = _SLURM_TIME.fullmatch(value.strip())
    if m is None:
        raise ConfigError(key, f"must be minutes or a Slurm time (HH:MM:SS, D-HH:MM:SS), not {value!r}")
    days, first, second, third = (int(g) if g is not None else None for g in m.groups())
    if days is not None:  # D-HH[:MM[:SS]]
        seconds = days * 86400 + (first or 0) * 3600 + (second or 0) * 60 + (third or 0)
    elif third is not None:  # HH:MM:SS
        seconds = (first or 0) * 3600 + (second or 0) * 60 + third
    elif second is not None:  # MM:SS
        seconds = (first or 0) * 60 + second
    else:  # MM
        seconds = (first or 0) * 60
    if seconds <= 0:
        raise ConfigError(key, f"must be a positive time, not {value!r}")
    return float(seconds)

"""Typed extensions of a JobSpec, registered by name so they travel as JSON.

An extension is a frozen dataclass deriving from :class:`Extension` with a class-level ``kind`` (its registered
name, such as ``"dispatch.Image"``). Its JSON form is ``{"kind": <kind>, <field>: <value>, ...}``. Each adapter
declares an :class:`ExtensionPolicy`: the kinds it requires and the kinds it accepts. A JobSpec carrying a kind
outside that policy is refused with :class:`~dispatch.errors.Unsupported` before any scheduler call.

The core ships four: :class:`Image`, :class:`Output`, :class:`SharedCheckpoint` and :class:`CessationWarning`.
Adapters register their own (``slurm.Placement``, ``kubeflow.RuntimeRef``) with :func:`register_extension`
(when imported).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from dispatch.errors import ConfigError, SpecError, Unsupported
from dispatch.settings import decode, encode

E = TypeVar("E", bound="Extension")

_REGISTRY: dict[str, type[Extension]] = {}


@dataclass(frozen=True)
class Extension:
    """Base of every extension. Subclasses set ``kind`` and are registered with :func:`register_extension`."""

    kind: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:
        """The JSON form: ``{"kind": ..., **fields}``."""
        data = encode(self)
        return {"kind": self.kind, **data}


def register_extension(cls: type[E]) -> type[E]:
    """Register an extension class under its ``kind``. Use as a class decorator. Re-registering the same
    class is harmless; another class under a taken name is an error."""
    if not cls.kind:
        raise TypeError(f"{cls.__name__} has no kind")
    existing = _REGISTRY.get(cls.kind)
    if existing is not None and existing.__qualname__ != cls.__qualname__:
        raise ValueError(f"extension kind {cls.kind!r} is already registered by {existing.__qualname__}")
    _REGISTRY[cls.kind] = cls
    return cls


def extension_kinds() -> frozenset[str]:
    """The kinds registered so far."""
    return frozenset(_REGISTRY)


def extension_from_json(data: object, path: str = "extension") -> Extension:
    """Decode one extension from its JSON form. Raises :class:`SpecError` naming the field."""
    if not isinstance(data, Mapping):
        raise SpecError(path, f"expected an object with a 'kind', got {type(data).__name__}")
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise SpecError(f"{path}.kind", "is required and must be a string")
    cls = _REGISTRY.get(kind) or _adapter_kind(kind)
    if cls is None:
        raise SpecError(f"{path}.kind", f"unknown extension kind {kind!r} (is its adapter installed?)")
    fields = {k: v for k, v in data.items() if k != "kind"}
    try:
        return decode(cls, fields, path=path)
    except ConfigError as exc:
        raise SpecError(exc.path, exc.message) from None


_KIND_LOADER: list[Callable[[str], None]] = []
"""Set by :mod:`dispatch.registry` (:func:`set_kind_loader`): imports the adapter an unknown kind's prefix names."""


def set_kind_loader(load: Callable[[str], None]) -> None:
    """Install the function that imports adapter ``name`` (the registry's), so an adapter's extension kind
    (``kubeflow.RuntimeRef``) decodes in a process that has not imported that adapter yet (``dispatch logs`` of a
    Kubeflow job reads its record before it opens the cluster)."""
    _KIND_LOADER[:] = [load]


def _adapter_kind(kind: str) -> type[Extension] | None:
    prefix = kind.split(".", 1)[0]
    if prefix == kind or prefix == "dispatch" or not _KIND_LOADER:
        return None
    _KIND_LOADER[0](prefix)
    return _REGISTRY.get(kind)


def _require(cond: bool, path: str, message: str) -> None:
    if not cond:
        raise SpecError(path, message)


def _check_text(value: object, path: str, *, allow_empty: bool = False) -> None:
    _require(isinstance(value, str), path, "must be a string")
    assert isinstance(value, str)
    _require(allow_empty or bool(value), path, "must not be empty")
    _require("\x00" not in value, path, "must not contain a NUL character")


@register_extension
@dataclass(frozen=True)
class Image(Extension):
    """A container image every rank runs in (capability ContainerImage).

    Required on Kubeflow. On Slurm each rank runs inside it through Apptainer, where the cluster's probe started a
    container: ``ref`` is an image path on the nodes, a reference with a scheme (``docker://``, ``oras://``), or a
    registry name as Kubernetes reads it (run as ``docker://<ref>``). A cluster answering no (Grid Engine, the
    local adapter, a Slurm cluster without a working Apptainer) refuses the job before anything is recorded.
    """

    kind: ClassVar[str] = "dispatch.Image"
    ref: str
    pull_policy: str | None = None

    def __post_init__(self) -> None:
        _check_text(self.ref, "ref")
        _require(not any(c.isspace() for c in self.ref), "ref", "an image reference has no white space")
        # no path, scheme or registry name starts with '-'; a runtime would read such a word as an option
        _require(not self.ref.startswith("-"), "ref", "an image reference does not start with '-'")
        if self.pull_policy is not None:
            _require(
                self.pull_policy in ("Always", "IfNotPresent", "Never"),
                "pullPolicy",
                "must be Always, IfNotPresent or Never",
            )


@register_extension
@dataclass(frozen=True)
class Output(Extension):
    """Where the job's output files go: an absolute directory on the cluster (capability OutputPath).

    Each execution writes its own stdout and stderr files there; the adapter names them.
    """

    kind: ClassVar[str] = "dispatch.Output"
    dir: str

    def __post_init__(self) -> None:
        _check_text(self.dir, "dir")
        _require(self.dir.startswith("/"), "dir", "must be an absolute path")
        _require("\n" not in self.dir, "dir", "must not contain a newline")


@register_extension
@dataclass(frozen=True)
class SharedCheckpoint(Extension):
    """A checkpoint location shared by every execution of the job, so a new execution can resume.

    The job sees it as ``DISPATCH_CHECKPOINT_DIR``; ``path`` is absolute on the cluster (a directory on a
    shared file system, or a mount path on Kubernetes with ``claim`` naming the PersistentVolumeClaim).
    """

    kind: ClassVar[str] = "dispatch.SharedCheckpoint"
    path: str
    claim: str | None = None

    def __post_init__(self) -> None:
        _check_text(self.path, "path")
        _require(self.path.startswith("/"), "path", "must be an absolute path")
        if self.claim is not None:
            _require(
                re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", self.claim) is not None,
                "claim",
                "must be a Kubernetes object name",
            )


@dataclass(frozen=True)
class ExtensionPolicy:
    """The extension kinds an adapter requires and the kinds it accepts (required kinds are accepted)."""

    required: frozenset[str] = frozenset()
    accepted: frozenset[str] = frozenset()

    def check(self, extensions: Iterable[Extension], adapter: str) -> None:
        """Raise :class:`Unsupported` for a kind this adapter does not accept, or a required kind missing."""
        kinds = [e.kind for e in extensions]
        allowed = self.accepted | self.required
        for kind in kinds:
            if kind not in allowed:
                raise Unsupported(
                    f"the {adapter} adapter does not accept the extension {kind}"
                    f" (accepted: {', '.join(sorted(allowed)) or 'none'})"
                )
        for kind in sorted(self.required):
            if kind not in kinds:
                raise Unsupported(f"the {adapter} adapter requires the extension {kind}")


def find_extension(extensions: Iterable[Extension], cls: type[E]) -> E | None:
    """The extension of class ``cls`` among ``extensions``, or None."""
    for ext in extensions:
        if isinstance(ext, cls):
            return ext
    return None


def extension_fields(ext: Extension) -> dict[str, Any]:
    """The fields of an extension by Python name (handy for adapters' mapping code)."""
    return {f.name: getattr(ext, f.name) for f in dataclasses.fields(ext)}


WARNING_SIGNALS = ("USR1", "USR2")
"""Signals a job may ask to be warned with: their default action ends a process, so only a job that handles them
(``dispatch.job``) should ask for one; SIGTERM is not among them because every adapter sends it anyway."""


@register_extension
@dataclass(frozen=True)
class CessationWarning(Extension):
    """Warn the job ``seconds`` before it is stopped, with ``signal`` (``USR1`` or ``USR2``), so it can checkpoint.

    Opt-in because the default action of SIGUSR1/SIGUSR2 ends a process that does not handle them. The job sees
    ``DISPATCH_CESSATION_SIGNAL`` and ``DISPATCH_CESSATION_GRACE``; :mod:`dispatch.job` installs the handler.
    What each adapter sends, when, and with how much grace is in docs/training.md and the adapters' docs (Slurm:
    ``--signal``; local: the launcher; Kubernetes only ever sends SIGTERM, so there ``seconds`` becomes the pods'
    termination grace).
    """

    kind: ClassVar[str] = "dispatch.CessationWarning"
    seconds: float = 30.0
    signal: str = "USR1"

    def __post_init__(self) -> None:
        _require(
            isinstance(self.seconds, int | float) and not isinstance(self.seconds, bool),
            "seconds",
            "must be a number of seconds",
        )
        _require(1 <= self.seconds <= 65535, "seconds", "must be between 1 and 65535")
        _require(self.signal in WARNING_SIGNALS, "signal", f"must be one of {', '.join(WARNING_SIGNALS)}")

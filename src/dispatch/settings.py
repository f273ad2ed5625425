"""Strict decoding of settings into dataclasses, and their JSON Schema.

An adapter's settings may arrive as an instance of its settings dataclass, a mapping, or JSON text. Whatever
the form, :func:`decode` checks every key and type and raises :class:`~dispatch.errors.ConfigError` naming the
dotted key path of the first thing wrong (``ssh.port``, ``environment.pass[1]``). Unknown keys are errors.

Keys are the camelCase form of field names (``cache_dir`` -> ``cacheDir``), or ``metadata["key"]`` where a
field sets it (a field named ``pass_`` is read from ``pass``). A field with ``metadata["duration"]`` takes a
number of seconds or a string such as ``"90s"``, ``"5m"``, ``"1h30m"``. A field with ``metadata["secret"]``
(a password, a token) is never echoed in an error: its value is replaced by ``<redacted>``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, get_args, get_origin

from dispatch.errors import ConfigError

T = TypeVar("T")

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: object, path: str = "") -> float:
    """Seconds from a number (seconds) or a string like ``"1h30m"``, ``"90s"``, ``"250ms"``."""
    if isinstance(value, bool):
        raise ConfigError(path, "expected a duration, got a boolean")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        pos, seconds = 0, 0.0
        for match in _DURATION_PART.finditer(text):
            if match.start() != pos:
                break
            seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
            pos = match.end()
        if pos != len(text) or not text:
            raise ConfigError(path, f"{value!r} is not a duration (use e.g. 90s, 5m, 1h30m)")
    else:
        raise ConfigError(path, f"expected a duration, got {type(value).__name__}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigError(path, "a duration must be finite and not negative")
    return seconds


def field_key(f: dataclasses.Field[Any]) -> str:
    """The settings key of a dataclass field."""
    key = f.metadata.get("key")
    if key:
        return str(key)
    head, *rest = f.name.rstrip("_").split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _describe(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _decode_value(tp: Any, value: object, path: str, meta: Mapping[str, Any]) -> Any:
    if meta.get("duration"):
        if value is None and _is_optional(tp):
            return None
        return parse_duration(value, path)
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin is typing.Union or origin is types.UnionType:
        args = get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise ConfigError(path, "must not be null")
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _decode_value(arg, value, path, meta)
            except ConfigError as exc:
                errors.append(exc)
        raise errors[0] if len(errors) == 1 else ConfigError(path, f"expected one of {tp}, got {value!r}")
    if origin is typing.Literal:
        allowed = get_args(tp)
        if value not in allowed:
            raise ConfigError(path, f"must be one of {', '.join(map(repr, allowed))}, got {value!r}")
        return value
    if origin in (list, tuple) or tp in (list, tuple):
        if not isinstance(value, list | tuple):
            raise ConfigError(path, f"expected a list, got {type(value).__name__}")
        args = get_args(tp)
        item_tp = args[0] if args else Any
        items = [_decode_value(item_tp, v, _join(path, i), {}) for i, v in enumerate(value)]
        return tuple(items) if (origin is tuple or tp is tuple) else items
    if origin in (dict, Mapping) or tp is dict or origin is typing.get_origin(Mapping[str, Any]):
        if not isinstance(value, Mapping):
            raise ConfigError(path, f"expected a mapping, got {type(value).__name__}")
        k_tp, v_tp = get_args(tp) or (str, Any)
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ConfigError(path, f"keys must be strings, got {k!r}")
            out[_decode_value(k_tp, k, _join(path, k), {})] = _decode_value(v_tp, v, _join(path, k), {})
        return out
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return decode(tp, value, path=path)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in tp)
            raise ConfigError(path, f"must be one of {choices}, got {value!r}") from None
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(path, f"expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(path, f"expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(path, f"expected a number, got {value!r}")
        if not math.isfinite(float(value)):
            raise ConfigError(path, "expected a finite number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(path, f"expected a string, got {type(value).__name__}")
        return value
    raise ConfigError(path, f"cannot decode a value of type {_describe(tp)}")


def _is_optional(tp: Any) -> bool:
    return type(None) in get_args(tp)


def decode(cls: type[T], value: object, *, path: str = "") -> T:
    """Decode ``value`` (an instance, a mapping or JSON text) into dataclass ``cls``, strictly.

    Raises :class:`ConfigError` naming the dotted key of the first problem. A ``ValueError`` or
    ``ConfigError`` raised by the dataclass's own ``__post_init__`` is re-raised as a ``ConfigError`` at
    ``path``.
    """
    if isinstance(value, cls):
        value = encode(value)
    if isinstance(value, str | bytes):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ConfigError(path, f"not valid JSON: {exc}") from None
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise ConfigError(path, f"expected a mapping, got {type(value).__name__}")
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = typing.get_type_hints(cls)
    fields = {field_key(f): f for f in dataclasses.fields(cls) if f.init}
    for key in value:
        if key not in fields:
            known = ", ".join(sorted(fields)) or "none"
            raise ConfigError(_join(path, str(key)), f"unknown key (known keys: {known})")
    kwargs: dict[str, Any] = {}
    hidden = [value[k] for k, f in fields.items() if f.metadata.get("secret") and k in value]
    for key, f in fields.items():
        if key in value:
            try:
                kwargs[f.name] = _decode_value(hints[f.name], value[key], _join(path, key), f.metadata)
            except ConfigError as exc:
                raise _scrubbed(exc, hidden) from None
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(_join(path, key), "is required")
    try:
        return cls(**kwargs)
    except ConfigError as exc:
        if path and exc.path and not exc.path.startswith(path):
            raise _scrubbed(ConfigError(_join(path, exc.path), exc.message), hidden) from None
        raise _scrubbed(exc, hidden) from None
    except (ValueError, TypeError) as exc:
        raise _scrubbed(ConfigError(path, str(exc)), hidden) from None


_SECRET_KEY = re.compile(r"(token|password|passphrase|secret)s?$", re.IGNORECASE)


def redact_secrets(value: Any) -> Any:
    """A copy of settings data (mappings, lists) with the values of secret-looking keys (``token``,
    ``password``, ``passphrase``, ``secret``, any case) replaced by ``"<redacted>"``: for echoing settings back."""
    if isinstance(value, Mapping):
        return {
            k: ("<redacted>" if isinstance(k, str) and _SECRET_KEY.search(k) and v is not None else redact_secrets(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_secrets(v) for v in value]
    return value


def _scrubbed(exc: ConfigError, hidden: list[Any]) -> ConfigError:
    """``exc`` without the values of fields marked ``secret`` (metadata ``secret=True``): never echo a password."""
    message = exc.message
    for v in hidden:
        for text in {repr(v), str(v)}:
            if text and len(text) >= 2:
                message = message.replace(text, "<redacted>")
    return exc if message == exc.message else ConfigError(exc.path, message)


def encode(value: Any) -> Any:
    """The JSON-ready form of a settings dataclass (keys in their settings spelling)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            out[field_key(f)] = encode(getattr(value, f.name))
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    if isinstance(value, float) and math.isinf(value):
        return None
    return value


def schema(cls: type[Any], *, title: str | None = None) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of dataclass ``cls``'s settings. Advisory: :func:`decode` is the judge.

    Each property carries its ``description`` (the field's ``doc`` metadata, else its class's docstring) and,
    unless required, its ``default`` (as it would be written in the settings).
    """
    out = _schema_of(cls)
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    if title:
        out["title"] = title
    return out


def _schema_of(tp: Any, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    meta = meta or {}
    if meta.get("duration"):
        return {
            "oneOf": [
                {"type": "number", "minimum": 0},
                {"type": "string", "pattern": r"^(\d+(\.\d+)?(ms|s|m|h|d))+$"},
            ]
        }
    origin = get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        opts = [_schema_of(a) for a in get_args(tp) if a is not type(None)]
        if _is_optional(tp):
            opts.append({"type": "null"})
        return opts[0] if len(opts) == 1 else {"anyOf": opts}
    if origin is typing.Literal:
        return {"enum": list(get_args(tp))}
    if origin in (list, tuple) or tp in (list, tuple):
        args = get_args(tp)
        return {"type": "array", "items": _schema_of(args[0]) if args else {}}
    if origin in (dict,) or tp is dict or origin is typing.get_origin(Mapping[str, Any]):
        args = get_args(tp)
        return {"type": "object", "additionalProperties": _schema_of(args[1]) if args else {}}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        props: dict[str, Any] = {}
        required = []
        for f in dataclasses.fields(tp):
            if not f.init:
                continue
            sub = _schema_of(hints[f.name], f.metadata)
            doc = f.metadata.get("doc")
            if doc:
                sub["description"] = doc
            if f.default is not dataclasses.MISSING:
                sub["default"] = encode(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                sub["default"] = encode(f.default_factory())
            else:
                required.append(field_key(f))
            props[field_key(f)] = sub
        out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
        if required:
            out["required"] = required
        if tp.__doc__:
            out["description"] = tp.__doc__.strip().splitlines()[0]
        return out
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if tp in simple:
        return {"type": simple[tp]}
    return {}

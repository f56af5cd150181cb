"""A small strict JSON codec for the protocol's dataclasses.

Each payload is a dataclass whose fields mirror a Go struct of
``bridge/wire``. A field's metadata says how Go encodes it:

* ``omitempty`` (the default for fields with a default value): left out when
  it holds its type's zero value (``""``, ``0``, ``False``, ``None``, empty
  list or dict) — Go's ``,omitempty``;
* ``always``: always written, even when zero.

An ``Optional`` field is a Go pointer: ``None`` is left out, ``0`` is kept.
Decoding is strict: a key the dataclass does not know raises
:class:`ProtocolError`, so a protocol change the SDK does not follow shows up.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from typing import Any, TypeVar, Union

T = TypeVar("T")

JSON = Any
"""A JSON value as :mod:`json` decodes it (a raw message in Go)."""


class ProtocolError(ValueError):
    """A message does not fit the protocol as this SDK knows it."""


def always(default: Any = dataclasses.MISSING) -> Any:
    """A field written even when it holds its zero value."""
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata={"always": True})
    return dataclasses.field(default=default, metadata={"always": True})


def named(key: str, default: Any = dataclasses.MISSING) -> Any:
    """A field whose JSON key is not its Python name (``from``)."""
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata={"json": key})
    return dataclasses.field(default=default, metadata={"json": key})


def _key(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get("json", f.name))


def _hints(cls: type) -> dict[str, Any]:
    cache = _HINTS.get(cls)
    if cache is None:
        module = sys.modules[cls.__module__]
        cache = typing.get_type_hints(cls, vars(module))
        _HINTS[cls] = cache
    return cache


_HINTS: dict[type, dict[str, Any]] = {}


def _is_optional(tp: Any) -> tuple[bool, Any]:
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return True, args[0]
    return False, tp


def decode(tp: Any, value: Any, where: str = "") -> Any:
    """Decode a JSON value into the Python type ``tp``."""
    optional, inner = _is_optional(tp)
    if value is None:
        if optional or inner is Any:
            return None
        raise ProtocolError(f"{where or 'value'}: null where {inner} was expected")
    tp = inner
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return from_dict(tp, value, where)
    origin = typing.get_origin(tp)
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise ProtocolError(f"{where}: expected a list")
        return [decode(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        _, item = typing.get_args(tp)
        if not isinstance(value, dict):
            raise ProtocolError(f"{where}: expected an object")
        return {k: decode(item, v, f"{where}.{k}") for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ProtocolError(f"{where}: expected a number")
        return value
    if tp in (int, str, bool):
        if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
            raise ProtocolError(f"{where}: expected {tp.__name__}, got {value!r}")
        return value
    raise ProtocolError(f"{where}: unsupported type {tp!r}")


def from_dict(cls: type[T], obj: Any, where: str = "", *, strict: bool = True) -> T:
    """Decode a JSON object into the dataclass ``cls``; strict: unknown keys raise."""
    name = where or cls.__name__
    if not isinstance(obj, dict):
        raise ProtocolError(f"{name}: expected an object, got {type(obj).__name__}")
    hints = _hints(cls)
    fields = {_key(f): f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(obj) - set(fields)
    if unknown and strict:
        raise ProtocolError(f"{name}: unknown field(s) {sorted(unknown)}")
    kwargs: dict[str, Any] = {}
    for key, value in obj.items():
        if key not in fields:
            continue
        f = fields[key]
        kwargs[f.name] = decode(hints[f.name], value, f"{name}.{key}")
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ProtocolError(f"{name}: {e}") from None


def _zero(value: Any) -> bool:
    return value is None or value is False or value == 0 or value == "" or value == [] or value == {}


def encode(value: Any) -> Any:
    """Encode a dataclass (or a value holding some) as a JSON value."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_dict(value)
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    return value


def to_dict(obj: Any) -> dict[str, Any]:
    """Encode a dataclass as a JSON object, leaving out what Go leaves out."""
    hints = _hints(type(obj))
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        optional, _ = _is_optional(hints[f.name])
        keep = f.metadata.get("always", False)
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        if optional and value is None and not keep:
            continue
        if not optional and not keep and has_default and _zero(value):
            continue
        out[_key(f)] = encode(value)
    return out

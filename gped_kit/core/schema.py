"""Configuration records for result keys: a versioned schema without per-field exceptions.

A stored result is keyed by a hash of the *record* of the configuration that produced it.
:func:`record` turns configuration objects into JSON data by one rule: a dataclass contributes
every field whose value differs from the field's declared default (fields marked
``field(metadata={"key": False})`` say how a run executes, not what it computes, and never
contribute). So adding a field with a default to a configuration class changes no existing
key, and nothing else needs to know about it; changing what a field *means* is a schema
change and bumps :data:`SCHEMA_VERSION`, which every key includes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from enum import Enum
from typing import Any

#: Version of the record rules and of the meaning of configuration fields.
SCHEMA_VERSION = 1


def _default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b) or (isinstance(a, Enum) and a == b)
    except Exception:  # noqa: BLE001 -- e.g. tensors: not comparable, so not a default
        return False


def record(obj: Any) -> Any:
    """JSON data describing ``obj`` for keys (see the module docstring).

    Dataclasses give their non-default key fields; enums their value; floats that are whole
    numbers stay floats (``1.0``, so ``1`` and ``1.0`` differ only where the type differs);
    objects with a ``record()`` method give its result; other callables their qualified name.
    """
    if hasattr(obj, "record") and callable(obj.record):
        return record(obj.record())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return record_fields(obj)
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, float):
        if not math.isfinite(obj):
            return repr(obj)
        return obj
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    if isinstance(obj, (list, tuple)):
        return [record(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): record(v) for k, v in obj.items()}
    name = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    module = getattr(obj, "__module__", None) or type(obj).__module__
    return f"{module}.{name}"


def record_fields(obj: Any, skip: tuple[str, ...] = ()) -> dict:
    """The record of dataclass ``obj``'s fields (see :func:`record`) without those in ``skip``,
    for a ``record()`` method that records them its own way."""
    out = {}
    for f in dataclasses.fields(obj):
        if f.name in skip or not f.metadata.get("key", True):
            continue
        value = getattr(obj, f.name)
        default = _default_of(f)
        if default is not dataclasses.MISSING and _same(value, default):
            continue
        out[f.name] = record(value)
    return out


def key_of(payload: Any, length: int = 16) -> str:
    """A short, stable hash of ``payload`` (JSON data) together with :data:`SCHEMA_VERSION`."""
    text = json.dumps({"schema": SCHEMA_VERSION, "payload": payload}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:length]

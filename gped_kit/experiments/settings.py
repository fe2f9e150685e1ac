"""Profiles: each experiment's settings as one typed dataclass, with named instances.

An experiment module defines a frozen dataclass of its settings (chain length, thinning, grids,
...) and ``PROFILES = {"default": ..., "paper": ...}``: the ``default`` profile runs on a CPU in
minutes, ``paper`` is Appendix A.2 for a GPU. Settings are *composed* from the library's own
configurations: a field may hold one (``ComparisonSettings.hydra`` is a
:class:`~gped_kit.baselines.hydra.HydraConfig`, ``Experiment3Settings.search`` a ``SearchSettings``),
never a copy of its fields. Every settings class validates its values in ``__post_init__`` with
:mod:`gped_kit.core.options`' helpers (``check_int``, ``check_positive``, ``parse_option``).

A notebook names each setting once, in its ``parameters`` cell: a plain setting as ``name = None``
(None meaning "the profile's value"), a composed one as ``name = Overrides()``, whose attributes
override that configuration's fields (``hydra.phase1_steps = 500``). :func:`resolve_settings`
applies them all, in one place. Papermill writes a parameter ``-p hydra.phase1_steps 500`` as the
line ``hydra.phase1_steps = 500`` after the parameters cell, which sets the attribute; the batch
runner passes such dotted names through (``-p hydra.phase1_steps=500``), and a mapping given to
:func:`resolve_settings` may hold them as keys (``{"hydra.phase1_steps": 500}``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any, TypeVar

S = TypeVar("S")


class Overrides(SimpleNamespace):
    """Overrides of a composed configuration, set as attributes: ``hydra = Overrides()`` then
    ``hydra.phase1_steps = 500``. Reading an attribute that was not set gives a nested
    ``Overrides`` (kept), so ``spiral.hydra.lr = 3e-3`` works without declaring ``spiral.hydra``.
    Names are checked against the configuration's fields by :func:`resolve_settings`."""

    def __getattr__(self, name: str) -> Overrides:
        if name.startswith("_"):  # Python's and IPython's protocol lookups (__deepcopy__, _repr_html_, ...)
            raise AttributeError(name)
        child = Overrides()
        setattr(self, name, child)
        return child


class _Fields(dict):
    """Field overrides of one composed configuration (from an :class:`Overrides` or dotted keys)."""


def _nest(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``overrides`` with every :class:`Overrides` and every group of dotted keys
    (``"hydra.phase1_steps"``) turned into nested :class:`_Fields`; a dotted key wins over the
    same field given in an ``Overrides``."""
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        if isinstance(value, Overrides):
            value = _fields(value)
        head, _, rest = str(key).partition(".")
        if rest:
            value = _Fields(_nest({rest: value}))
        current = out.get(head)
        if isinstance(current, _Fields) and isinstance(value, _Fields):
            value = _merge(current, value) if rest else _merge(value, current)
        elif isinstance(current, _Fields) and not rest:
            continue  # the dotted overrides of this field stand
        out[head] = value
    return out


def _fields(overrides: Overrides) -> _Fields:
    out = _Fields()
    for name, value in vars(overrides).items():
        out[name] = _fields(value) if isinstance(value, Overrides) else value
    return out


def _merge(low: _Fields, high: _Fields) -> _Fields:
    out = _Fields(low)
    for name, value in high.items():
        out[name] = _merge(out[name], value) if isinstance(out.get(name), _Fields) and isinstance(value, _Fields) \
            else value
    return out


def _is_config(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _apply(base: Any, changes: Mapping[str, Any], where: str, strict: bool) -> Any:
    """``base`` (a dataclass) with ``changes`` applied: None keeps a field; field overrides
    (:class:`_Fields`, or a mapping on a field that holds a configuration) change that
    configuration's own fields, recursively; anything else replaces the value. With ``strict``
    a name that is not a field is an error; otherwise it is ignored (a notebook's namespace holds
    much else)."""
    fields = {f.name for f in dataclasses.fields(base) if f.init}
    unknown = sorted(n for n in changes if n not in fields and (strict or isinstance(changes[n], _Fields)))
    if unknown:
        raise ValueError(f"{where}{unknown[0]} is not a setting of {type(base).__name__}; allowed: {sorted(fields)}")
    replace = {}
    for name in sorted(fields & set(changes)):
        value, current = changes[name], getattr(base, name)
        if value is None or (isinstance(value, _Fields) and not value):
            continue
        if isinstance(value, Mapping) and _is_config(current):
            replace[name] = _apply(current, value, f"{where}{name}.", strict=True)
        elif isinstance(value, _Fields):
            raise ValueError(f"{where}{name}: the profile's value {current!r} is not a configuration with fields; "
                             f"give the whole value ({name} = ...) instead of {where}{name}.{next(iter(value))}")
        else:
            replace[name] = value
    return dataclasses.replace(base, **replace) if replace else base


def resolve_settings(profiles: Mapping[str, S], profile: str, overrides: Mapping[str, Any] | None = None) -> S:
    """``profiles[profile]`` with the settings that ``overrides`` gives applied.

    ``overrides`` may be a notebook's whole namespace (``globals()``): plain names that are not
    fields of the settings are ignored, a None value keeps the profile's value, an
    :class:`Overrides` (or a mapping) on a composed field overrides that configuration's own
    fields, and a dotted key ``"hydra.phase1_steps"`` does the same for one field. Every name
    inside a composed configuration, and the first part of every dotted key, must be a field.
    ``ValueError`` names an unknown profile or field (with the allowed ones); the settings
    classes validate the values."""
    if profile not in profiles:
        raise ValueError(f"profile={profile!r} is not known; allowed: {sorted(profiles)}")
    return _apply(profiles[profile], _nest(overrides or {}), "", strict=False)


def changed_settings(settings: S, base: S) -> dict[str, Any]:
    """The overrides that turn ``base`` into ``settings`` (two settings of one class): every field whose
    value differs, a field holding a configuration of the same class on both sides as dotted keys of
    its own changed fields (``{"hydra.phase1_steps": 200}``), recursively. :func:`resolve_settings`
    with them gives ``settings`` back from ``base``'s profile, and gives another profile the same
    changes (e.g. a run's tiny chains, to read another profile's tiny chains)."""
    if type(settings) is not type(base) or not _is_config(settings):
        raise TypeError(f"settings and base must be settings of one class, got {type(settings).__name__} and "
                        f"{type(base).__name__}")
    out: dict[str, Any] = {}
    for f in dataclasses.fields(settings):
        if not f.init:
            continue
        value, was = getattr(settings, f.name), getattr(base, f.name)
        if value == was:
            continue
        if _is_config(value) and type(value) is type(was):
            out.update({f"{f.name}.{k}": v for k, v in changed_settings(value, was).items()})
        else:
            out[f.name] = value
    return out

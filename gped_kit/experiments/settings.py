"""Profiles: each experiment's settings as one typed dataclass, with named instances.

An experiment module defines a frozen dataclass of its settings (chain length, thinning, grids,
...) and ``PROFILES = {"default": ..., "paper": ...}``: the ``default`` profile runs on a 2-core
CPU in minutes, ``paper`` is Appendix A.2 for a GPU. A notebook names each setting once, in its
``parameters`` cell, with ``None`` meaning "the profile's value", and resolves them with
:func:`resolve_settings`, which applies every setting of the namespace that is not None.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

S = TypeVar("S")


def resolve_settings(profiles: Mapping[str, S], profile: str, overrides: Mapping[str, Any] | None = None) -> S:
    """``profiles[profile]`` with each of its fields that ``overrides`` gives a non-None value for
    replaced by that value. ``overrides`` may be a notebook's whole namespace (``globals()``):
    names that are not fields of the settings are ignored. ``ValueError`` names an unknown profile;
    the settings class validates the values."""
    if profile not in profiles:
        raise ValueError(f"profile={profile!r} is not known; allowed: {sorted(profiles)}")
    base = profiles[profile]
    names = {f.name for f in dataclasses.fields(base)}
    changes = {k: v for k, v in (overrides or {}).items() if k in names and v is not None}
    return dataclasses.replace(base, **changes)


def settings_table(settings: Any) -> dict[str, Any]:
    """The settings as a plain dict (for printing at the top of a notebook)."""
    return dataclasses.asdict(settings)

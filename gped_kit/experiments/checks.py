"""What a notebook tests on its results, declared once, and the outcome of each test recorded.

Each experiment package declares its **checks** (:class:`Check`) beside its artifacts: a statement over the
fields of the cell it tests (``"{model}: search finished"``) and its :class:`Role`:

* an **invariant** must hold in every run that records it: a ``False`` outcome means the kit's code, data or
  store is wrong (a chain that did not finish, a pruned network that does not equal its masked original). Its
  value is a ``bool``;
* a **finding** is a result of this run and profile: either outcome is information (the paper's trend holds in
  8 of 12 cells; a searched student beats the base), and its value may be a count, a number or a text.

The notebook tests a check through its writer (:meth:`gped_kit.viz.writer.ArtifactWriter.check`), which
prints one line, ``<statement>: <value>`` (the line nbval compares), and records a :class:`CheckOutcome` in
the figures folder's manifest under the run (``"<notebook>/<profile>"``): the check, the cell's fields, the
value and its role. A run's recorded outcomes are those of its latest execution. The paper-profile test asserts
the outcomes a run must record, with their values (:attr:`~gped_kit.experiments.frame.Experiment.expected_checks`),
and that every invariant recorded holds; the batch runner names the invariants a notebook recorded as not holding.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .templates import template_fields


class Role(StrEnum):
    """What a check's outcome means (see the module docstring)."""

    #: must hold in every run that records it; the value is a bool
    INVARIANT = "invariant"
    #: a result of the run; either outcome is information
    FINDING = "finding"


def json_value(value: Any) -> Any:
    """``value`` as JSON values (numpy and torch scalars as Python numbers and bools, anything else
    JSON cannot hold as its text)."""
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", 0) == 0:
        value = item()
    return json.loads(json.dumps(value, default=str))


@dataclass(frozen=True)
class Check:
    """One statement a notebook tests (see the module docstring). ``key`` names it within its notebook;
    ``statement`` is a template over the fields of the cell it tests (none: one outcome per run); ``role``
    whether it must hold (:attr:`Role.INVARIANT`) or is a result (:attr:`Role.FINDING`)."""

    key: str
    statement: str
    role: Role = Role.INVARIANT

    def __post_init__(self) -> None:
        if not self.key.isidentifier():
            raise ValueError(f"check key={self.key!r}: must be an identifier")
        if not self.statement.strip():
            raise ValueError(f"check {self.key!r}: its statement is empty")
        object.__setattr__(self, "role", Role(self.role))

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields of the cell the statement is about (``("model",)`` for ``"{model}: search finished"``)."""
        return template_fields(self.statement)

    def cell(self, **values: Any) -> str:
        """The statement for the cell ``values`` (every field, nothing else): the outcome's name in the
        manifest and the printed line before its value."""
        if set(values) != set(self.fields):
            raise ValueError(f"check {self.key!r} ({self.statement!r}) is about {list(self.fields)}; given "
                             f"{sorted(values)}")
        return self.statement.format(**values)

    def outcome(self, value: Any, **values: Any) -> CheckOutcome:
        """The outcome ``value`` of this check for the cell ``values``. An invariant's value must be a bool
        (a numpy or torch bool is taken as one)."""
        plain = json_value(value)
        if self.role is Role.INVARIANT and not isinstance(plain, bool):
            raise ValueError(f"check {self.key!r} is an invariant: its value must be True or False, given "
                             f"{value!r} ({type(value).__name__})")
        statement = self.cell(**values)
        return CheckOutcome(self.key, statement, self.role, plain, {k: str(v) for k, v in values.items()},
                            line=f"{statement}: {value}")


@dataclass(frozen=True)
class CheckOutcome:
    """A check's outcome in one run: ``check`` (its key), ``statement`` (filled for the cell ``values``),
    ``role``, ``value`` (JSON) and ``line``, what the notebook printed."""

    check: str
    statement: str
    role: Role
    value: Any
    values: dict[str, str] = field(default_factory=dict)
    line: str = ""

    @property
    def failed(self) -> bool:
        """Whether this is an invariant that did not hold."""
        return self.role is Role.INVARIANT and self.value is not True

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "statement": self.statement, "role": str(self.role), "value": self.value,
                "values": dict(self.values), "line": self.line}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CheckOutcome:
        return cls(d["check"], d["statement"], Role(d["role"]), d["value"], dict(d.get("values", {})),
                   d.get("line", ""))


def declare_checks(*checks: Check) -> dict[str, Check]:
    """A notebook's checks by key; two with one key, or two whose statements could name the same outcome,
    are an error."""
    out: dict[str, Check] = {}
    for c in checks:
        if c.key in out:
            raise ValueError(f"check key {c.key!r} declared twice")
        same = [d.key for d in out.values() if d.statement == c.statement]
        if same:
            raise ValueError(f"checks {same[0]!r} and {c.key!r} have the same statement: {c.statement!r}")
        out[c.key] = c
    return out


__all__ = ["Check", "CheckOutcome", "Role", "declare_checks", "json_value"]

"""A notebook's parameters and the ``-p [NOTEBOOK:]KEY=VALUE`` overrides of the commands that run notebooks.

Notebooks declare their parameters in a cell tagged ``parameters`` (papermill's convention), read here with
papermill's own parser (:func:`inspect_parameters`). :func:`parse_override` reads one ``-p``, its VALUE as a
JSON/YAML literal (:func:`parse_value`); :func:`check_overrides` rejects, before anything runs, an override that no
notebook it applies to declares, naming the closest declared names; :func:`plain_overrides` is the parser of the
commands whose settings apply to every notebook they run.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import yaml
from papermill.translators import papermill_translators

from .executors import FALLBACK_KERNEL

PARAMETERS_TAG = "parameters"


@dataclass(frozen=True)
class ParameterOverride:
    """A ``-p [NOTEBOOK:]KEY=VALUE`` override.

    Attributes:
        key: Parameter name.
        value: Parsed value.
        notebook: ``None`` for a global override, else a notebook name (with or
            without ``.ipynb``) or a glob matched against the name.
        text: The override as given on the command line (``""`` when built in code);
            not part of equality.
    """

    key: str
    value: Any
    notebook: str | None = None
    text: str = field(default="", compare=False)

    @property
    def given(self) -> str:
        """The override as given, or ``[NOTEBOOK:]KEY=VALUE`` rebuilt from its parts."""
        if self.text:
            return self.text
        prefix = f"{self.notebook}:" if self.notebook is not None else ""
        return f"{prefix}{self.key}={json.dumps(self.value, default=str)}"

    def applies_to(self, path: Path) -> bool:
        """Whether this override targets the notebook at ``path``."""
        if self.notebook is None:
            return True
        pattern = self.notebook
        candidates = (path.stem, path.name, str(path), path.as_posix())
        return any(fnmatch.fnmatchcase(c, pattern) for c in candidates)


def inspect_parameters(path: Path) -> dict[str, Any] | None:
    """Parameters declared in the notebook's ``parameters`` cell, with defaults.

    Returns ``None`` if the notebook has no cell tagged ``parameters``. Uses
    papermill's translators, i.e. the same parser papermill uses when injecting.
    """
    nb = nbformat.read(str(path), as_version=4)
    cell = next(
        (c for c in nb.cells if PARAMETERS_TAG in c.get("metadata", {}).get("tags", [])),
        None,
    )
    if cell is None:
        return None
    kernelspec = nb.metadata.get("kernelspec", {})
    language = (
        kernelspec.get("language") or nb.metadata.get("language_info", {}).get("name") or "python"
    )
    translator = papermill_translators.find_translator(kernelspec.get("name") or FALLBACK_KERNEL, language)
    return {p.name: p.default for p in translator.inspect(cell)}


def parse_value(raw: str) -> Any:
    """Parse a command-line value as a JSON/YAML literal, else keep the string.

    ``"3"`` -> 3, ``"1e-3"`` -> 0.001, ``"true"``/``"True"`` -> True,
    ``"[1, 2]"`` -> [1, 2], ``"None"``/``"null"`` -> None, ``"abc"`` -> "abc",
    ``""`` -> "".
    """
    text = raw.strip()
    if text == "":
        return ""
    if text == "None":
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        value = yaml.safe_load(text)
    except Exception:  # noqa: BLE001 - not a literal: keep the string
        return raw
    return value if _is_plain(value) else raw


def _is_plain(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    return False


def parse_override(text: str) -> ParameterOverride:
    """Parse ``KEY=VALUE`` or ``NOTEBOOK:KEY=VALUE``; KEY is a name or a dotted name
    (``hydra.phase1_steps``, a field of a composed setting).

    Raises:
        ValueError: if there is no ``=`` or a part of KEY is not a Python identifier.
    """
    if "=" not in text:
        raise ValueError(f"expected KEY=VALUE or NOTEBOOK:KEY=VALUE, got {text!r}")
    left, raw = text.split("=", 1)
    notebook: str | None = None
    if ":" in left:
        notebook, left = left.rsplit(":", 1)
        notebook = notebook.strip() or None
    key = left.strip()
    if not all(part.isidentifier() for part in key.split(".")):
        raise ValueError(f"parameter name {key!r} in {text!r} is not a valid identifier (or dotted identifiers)")
    return ParameterOverride(key=key, value=parse_value(raw), notebook=notebook, text=text)


def plain_overrides(texts: Sequence[str], hint: str) -> dict[str, Any]:
    """``-p KEY=VALUE`` overrides as ``{key: value}`` for a command whose settings apply to every notebook it
    runs; a ``NOTEBOOK:KEY=VALUE`` is a ``ValueError`` naming it, with ``hint`` (what to give instead)."""
    overrides = {}
    for text in texts:
        override = parse_override(text)
        if override.notebook is not None:
            raise ValueError(f"-p {text!r}: {hint}")
        overrides[override.key] = override.value
    return overrides


class UnknownParameterError(ValueError):
    """``-p`` overrides that none of the selected notebooks they apply to declares (one line each)."""


def check_overrides(
    notebooks: Sequence[Path],
    overrides: Sequence[ParameterOverride],
    *,
    inspect: Callable[[Path], dict[str, Any] | None] = inspect_parameters,
) -> None:
    """Check, before anything runs, that each override names a parameter some notebook it applies to declares.

    A global override must be declared by at least one of ``notebooks``; a ``NOTEBOOK:KEY=VALUE`` one by at
    least one of the selected notebooks NOTEBOOK matches (one that matches none of them is left to
    :func:`plan_runs`, which warns). A dotted KEY counts as declared when its first part is
    (``hydra.phase1_steps`` by ``hydra = Overrides()``; :func:`check_runs` checks the field). A notebook
    without a ``parameters`` cell, or whose cell cannot be read, declares nothing.

    Raises:
        UnknownParameterError: one line per undeclared override, naming it as given, the notebooks it
            applies to and the closest declared names, e.g. ``-p num_iteration=5: no selected notebook
            declares 'num_iteration' (selected: 01_experiment1, 02_experiment2_mnist); did you mean
            num_iterations?``.
    """
    declared: list[tuple[Path, set[str]]] = []
    unreadable: set[Path] = set()
    for nb in notebooks:
        nb = Path(nb)
        try:
            names = inspect(nb)
        except Exception:  # noqa: BLE001 - plan_runs warns about it; here it declares nothing
            names = None
            unreadable.add(nb)
        declared.append((nb, set(names or {})))
    problems: list[str] = []
    for override in overrides:
        targets = [(nb, names) for nb, names in declared if override.applies_to(nb)]
        root = override.key.split(".")[0]
        if not targets or any(root in names for _, names in targets):
            continue
        problems.append(_undeclared_message(override, targets, declared, unreadable))
    if problems:
        raise UnknownParameterError("\n".join(problems))


def _undeclared_message(
    override: ParameterOverride,
    targets: Sequence[tuple[Path, set[str]]],
    declared: Sequence[tuple[Path, set[str]]],
    unreadable: set[Path],
) -> str:
    root, dot, rest = override.key.partition(".")
    stems = ", ".join(nb.stem for nb, _ in targets)
    if override.notebook is None:
        text = f"no selected notebook declares {override.key!r} (selected: {stems})"
    elif len(targets) == 1:
        text = f"{targets[0][0].stem} does not declare {override.key!r}"
    else:
        text = f"no selected notebook matching {override.notebook!r} declares {override.key!r} (matching: {stems})"
    known = sorted(set().union(*(names for _, names in targets)))
    close = [f"{name}{dot}{rest}" for name in difflib.get_close_matches(root, known, n=3)]
    if close:
        options = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
        text += f"; did you mean {options}?"
    target_paths = {nb for nb, _ in targets}
    elsewhere = [nb.stem for nb, names in declared if nb not in target_paths and root in names]
    if elsewhere:
        text += f" (declared by {', '.join(elsewhere)})"
    missed = [nb.stem for nb in target_paths & unreadable]
    if missed:
        text += f" (could not read the parameters of {', '.join(sorted(missed))})"
    return f"-p {override.given}: {text}"

"""Batch notebook runner: execute the project's notebooks headlessly.

Command line, from the repository root (``python -m gped_kit.cli.batch --help`` lists every option)::

    python -m gped_kit.cli.batch                      # every notebooks/*.ipynb, profile "default"
    python -m gped_kit.cli.batch --profile paper      # pass profile="paper" to every notebook
    python -m gped_kit.cli.batch --profile all --inplace  # every profile the notebooks show, default last
    python -m gped_kit.cli.batch --only 00_quickstart # one notebook (name, path or glob)
    python -m gped_kit.cli.batch -p seed=1 -p 01_experiment1:num_iterations=5000
    python -m gped_kit.cli.batch -p 07_hydra_comparison:hydra.phase1_steps=500
    python -m gped_kit.cli.batch --dry-run            # show what would run, run nothing

Notebooks are discovered in ``notebooks/`` and executed into ``outputs/notebooks/<profile>/``
(with ``batch_summary.csv``), both relative to the current directory; ``--notebook-dir`` and
``--output-dir`` choose others. Each kernel runs in its notebook's own folder.

Library use::

    from gped_kit.cli.batch import run_batch
    from gped_kit.cli.executors import LocalPapermillExecutor, NotebookRun
    runs = [NotebookRun(Path("notebooks/00_quickstart.ipynb"), {"profile": "ci"},
                        Path("outputs/notebooks/ci/00_quickstart.ipynb"))]
    summary = run_batch(runs, LocalPapermillExecutor(kernel_name="python3"))

Parameters
    Notebooks declare their parameters in a cell tagged ``parameters`` (papermill's
    convention). The runner inspects that cell and passes only parameters the
    notebook declares. ``--profile NAME`` becomes the parameter ``profile`` (left out,
    with a warning, where a notebook does not declare it); ``-p KEY=VALUE`` applies to
    every notebook that declares KEY and ``-p NOTEBOOK:KEY=VALUE`` to the named
    notebook(s) only (NOTEBOOK is a notebook's name with or without ``.ipynb``, or a
    glob on it). An override whose KEY none of the selected notebooks it applies to
    declares is a usage error (exit status 2) before anything runs, naming the closest
    declared names (:func:`check_overrides`); one that some of them declare is passed
    to those and left out, with a warning, for the others.
    KEY may be dotted, ``hydra.phase1_steps``: a field of a composed setting that the
    notebook declares as ``hydra = Overrides()`` (papermill writes ``hydra.phase1_steps = 500``;
    :func:`gped_kit.experiments.settings.resolve_settings` applies it).
    Precedence, lowest first: profile, global ``-p``, per-notebook ``-p``. VALUE is
    read as a JSON/YAML literal (``3``, ``1e-3``, ``true``, ``[1, 2]``, ``None``),
    falling back to the plain string.

Checks before running
    Each registered notebook (:mod:`gped_kit.experiments.registry`) has its settings resolved
    from its parameters and its chains built before any notebook starts (:func:`check_runs`):
    an unknown profile, an unknown or invalid setting, or a bad chain parameter ends the run
    with a usage error (exit status 2) naming the notebook and the setting.

Existing outputs
    Nothing in the output directory is overwritten: an existing executed notebook
    (or summary CSV) of the same name is first renamed to
    ``<stem>.<YYYYmmdd-HHMMSS>.<ext>``, the time stamp being the old file's
    modification time (``-2``, ``-3``, ... are appended if that name is taken).
    With ``--inplace`` the notebook is still executed into the output directory
    first and, only if it ran without error, copied over the source notebook in
    ``notebooks/`` (whose previous version is in git).

Execution engines
    :mod:`gped_kit.cli.executors`: :class:`Executor` is the extension point (e.g. a
    cluster/queue engine); :class:`LocalPapermillExecutor` runs papermill in this process, one
    kernel per notebook, notebooks one after another; :class:`RayPapermillExecutor` submits
    each notebook as a Ray task.
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import functools
import json
import logging
import math
import re
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import yaml
from papermill.translators import papermill_translators

from ..experiments.executors import ExecutorName
from ..experiments.registry import NOTEBOOKS
from ..experiments.registry import notebook as registered_notebook
from .executors import (
    FALLBACK_KERNEL,
    PROJECT_KERNEL,
    Executor,
    LocalPapermillExecutor,
    NotebookRun,
    RayPapermillExecutor,
)

logger = logging.getLogger("gped_kit.cli.batch")

DEFAULT_NOTEBOOK_DIR = Path("notebooks")
DEFAULT_OUTPUT_ROOT = Path("outputs") / "notebooks"
DEFAULT_PROFILE = "default"
#: ``--profile all``: every profile each notebook shows (its experiment's ``shown_profiles``).
ALL_PROFILES = "all"
SUMMARY_FILENAME = "batch_summary.csv"
PARAMETERS_TAG = "parameters"

STATUS_RAN = "ran"
STATUS_FAILED = "failed"
STATUS_SKIPPED = "skipped"
SUMMARY_COLUMNS = ("notebook", "status", "seconds", "output_path", "error", "parameters")

_GLOB_CHARS = re.compile(r"[*?\[]")
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_MAX_ERROR_CHARS = 300


# --------------------------------------------------------------------------- specs


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


# ----------------------------------------------------------------------- discovery


def discover_notebooks(notebook_dir: Path = DEFAULT_NOTEBOOK_DIR) -> list[Path]:
    """All ``*.ipynb`` files directly in ``notebook_dir``, sorted by file name."""
    return sorted(
        (p for p in Path(notebook_dir).glob("*.ipynb") if p.is_file()),
        key=lambda p: p.name,
    )


def _resolve_selector(selector: str, notebook_dir: Path) -> list[Path]:
    as_path = Path(selector)
    if as_path.is_file():
        return [as_path]
    if _GLOB_CHARS.search(selector):
        if as_path.is_absolute():
            found = sorted(Path(as_path.anchor).glob(str(as_path.relative_to(as_path.anchor))))
        else:
            found = sorted(Path().glob(selector))
        if not found:
            found = sorted(notebook_dir.glob(selector))
        if not found and not selector.endswith(".ipynb"):
            found = sorted(notebook_dir.glob(selector + ".ipynb"))
        return [p for p in found if p.is_file() and p.suffix == ".ipynb"]
    for candidate in (notebook_dir / selector, notebook_dir / f"{selector}.ipynb"):
        if candidate.is_file():
            return [candidate]
    return []


def select_notebooks(selectors: Sequence[str], notebook_dir: Path = DEFAULT_NOTEBOOK_DIR) -> list[Path]:
    """Notebooks named by ``selectors``, or all of ``notebook_dir`` if there are none.

    A selector is a path to a notebook, a notebook name in ``notebook_dir`` (with or
    without ``.ipynb``), or a glob (tried relative to the current directory, then
    inside ``notebook_dir``). Order follows the selectors; duplicates are dropped.

    Raises:
        ValueError: if a selector matches nothing.
    """
    notebook_dir = Path(notebook_dir)
    if not selectors:
        return discover_notebooks(notebook_dir)
    selected: list[Path] = []
    seen: set[Path] = set()
    for selector in selectors:
        matches = _resolve_selector(selector, notebook_dir)
        if not matches:
            raise ValueError(f"no notebook matches {selector!r} (looked in {notebook_dir}/)")
        for match in matches:
            key = match.resolve()
            if key not in seen:
                seen.add(key)
                selected.append(match)
    return selected


# ---------------------------------------------------------------------- parameters


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


def plan_runs(
    notebooks: Sequence[Path],
    *,
    output_dir: Path,
    profile: str | None = DEFAULT_PROFILE,
    overrides: Sequence[ParameterOverride] = (),
    inplace: bool = False,
    cwd: Path | None = None,
    inspect: Callable[[Path], dict[str, Any] | None] = inspect_parameters,
) -> list[NotebookRun]:
    """Build one :class:`NotebookRun` per notebook.

    Each notebook gets ``profile`` (as parameter ``profile``), then the global
    overrides, then the overrides naming it; of these only the parameters the
    notebook declares are kept (the rest are logged as warnings); a dotted
    parameter ``hydra.phase1_steps`` is kept when the notebook declares ``hydra``.
    Overrides no notebook declares are not rejected here: the command line calls
    :func:`check_overrides` first.

    Raises:
        ValueError: if two notebooks would write the same output file.
    """
    output_dir = Path(output_dir)
    global_overrides = [o for o in overrides if o.notebook is None]
    targeted = [o for o in overrides if o.notebook is not None]
    for override in targeted:
        if not any(override.applies_to(nb) for nb in notebooks):
            logger.warning(
                "override %s:%s matches none of the selected notebooks", override.notebook, override.key
            )

    runs: list[NotebookRun] = []
    outputs: dict[Path, Path] = {}
    for nb in notebooks:
        nb = Path(nb)
        try:
            declared = inspect(nb)
        except Exception as exc:  # noqa: BLE001 - reported, the run will show the real error
            logger.warning("%s: could not inspect parameters (%s)", nb.name, _first_line(exc))
            declared = {}
        has_parameters_cell = declared is not None
        declared = declared or {}

        requested: dict[str, Any] = {}
        if profile is not None:
            requested["profile"] = profile
        for override in global_overrides + [o for o in targeted if o.applies_to(nb)]:
            requested[override.key] = override.value
        parameters = {k: v for k, v in requested.items() if k.split(".")[0] in declared}
        dropped = [k for k in requested if k not in parameters]
        dropped_text = ", ".join(repr(k) for k in dropped)
        if not has_parameters_cell:
            logger.warning(
                "%s has no cell tagged %r%s",
                nb.name,
                PARAMETERS_TAG,
                f"; not passing {dropped_text}" if dropped else "",
            )
        elif dropped:
            logger.warning("%s does not declare %s; not passed", nb.name, dropped_text)

        output_path = output_dir / nb.name
        if output_path in outputs:
            raise ValueError(f"{nb} and {outputs[output_path]} would both be written to {output_path}")
        outputs[output_path] = nb
        runs.append(
            NotebookRun(
                path=nb,
                parameters=parameters,
                output_path=output_path,
                cwd=cwd,
                publish_path=nb if inplace else None,
            )
        )
    return runs


def notebook_profiles(path: Path) -> tuple[str, ...]:
    """The profiles notebook ``path`` shows (its own run's and those read back beside it: its experiment's
    :attr:`~gped_kit.experiments.frame.Experiment.shown_profiles`); ``("default",)`` for one not registered."""
    experiment = NOTEBOOKS.get(Path(path).stem)
    return experiment.shown_profiles if experiment is not None else (DEFAULT_PROFILE,)


def plan_all_profiles(
    notebooks: Sequence[Path],
    *,
    output_dir: Path,
    overrides: Sequence[ParameterOverride] = (),
    inplace: bool = False,
    cwd: Path | None = None,
    inspect: Callable[[Path], dict[str, Any] | None] = inspect_parameters,
) -> list[NotebookRun]:
    """The runs of ``--profile all``: each notebook once per profile it shows
    (:func:`notebook_profiles`), into ``output_dir/<profile>/``.

    Every other profile runs first, one profile after another in the order the notebooks name
    them, and the ``default`` profile last, for every notebook: a notebook run with ``default``
    reads the other profiles back from the results store and shows them beside its own, so they
    must be stored before it runs. Only the ``default`` runs are copied back with ``inplace`` (the
    committed notebooks are ``default`` runs). Overrides apply to every run, as with one profile.
    """
    order: list[str] = []
    for nb in notebooks:
        order += [p for p in notebook_profiles(nb) if p != DEFAULT_PROFILE and p not in order]
    runs: list[NotebookRun] = []
    for profile in order:
        showing = [nb for nb in notebooks if profile in notebook_profiles(nb)]
        runs += plan_runs(showing, output_dir=Path(output_dir) / profile, profile=profile, overrides=overrides,
                          inplace=False, cwd=cwd, inspect=inspect)
    runs += plan_runs(notebooks, output_dir=Path(output_dir) / DEFAULT_PROFILE, profile=DEFAULT_PROFILE,
                      overrides=overrides, inplace=inplace, cwd=cwd, inspect=inspect)
    return runs


def check_runs(runs: Sequence[NotebookRun]) -> dict[str, str]:
    """Each registered notebook's settings and chains under its parameters, checked before anything
    runs (:mod:`gped_kit.experiments.registry`): its profile, overrides (a dotted one must name a field
    of the composed setting) and chain parameters are resolved as the notebook resolves them. Returns
    ``{notebook name: error message}`` for those that fail (``"<name> (profile <profile>)"`` for a
    run with another profile than ``default``); unregistered notebooks and notebooks without profiles
    are not checked."""
    problems = {}
    for run in runs:
        try:
            entry = registered_notebook(run.name)
        except ValueError:
            continue
        if not entry.profiles:
            continue
        params = dict(run.parameters)
        profile = params.get("profile", DEFAULT_PROFILE)
        name = run.name if profile == DEFAULT_PROFILE else f"{run.name} (profile {profile})"
        try:
            settings = entry.settings(profile, params)
            entry.chain_tasks(settings, seed=params.get("seed", 0), data_root=params.get("data_root"),
                              **{k: v for k, v in params.items() if k in entry.parameters})
        except (ValueError, TypeError) as exc:
            problems[name] = _first_line(exc)
    return problems


# -------------------------------------------------------------------------- running


def move_aside(path: Path) -> Path | None:
    """Rename an existing ``path`` to ``<stem>.<mtime stamp>[-N]<suffix>``.

    Returns the new path, or ``None`` if ``path`` did not exist.
    """
    path = Path(path)
    if not path.exists():
        return None
    stamp = datetime.fromtimestamp(path.stat().st_mtime).strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.stem}.{stamp}{path.suffix}")
    counter = 2
    while target.exists():
        target = path.with_name(f"{path.stem}.{stamp}-{counter}{path.suffix}")
        counter += 1
    path.rename(target)
    logger.info("kept previous %s as %s", path.name, target.name)
    return target


def _first_line(exc: BaseException) -> str:
    ename = getattr(exc, "ename", None)
    if ename:  # papermill.PapermillExecutionError
        text = f"{ename}: {getattr(exc, 'evalue', '')}"
    else:
        text = f"{type(exc).__name__}: {exc}"
    text = _ANSI_ESCAPE.sub("", text)
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    return line if len(line) <= _MAX_ERROR_CHARS else line[: _MAX_ERROR_CHARS - 3] + "..."


def _row(run: NotebookRun, status: str, seconds: float, error: str) -> dict[str, Any]:
    return {
        "notebook": run.path.name,
        "status": status,
        "seconds": round(seconds, 2),
        "output_path": str(run.output_path) if status != STATUS_SKIPPED else "",
        "error": error,
        "parameters": json.dumps(dict(run.parameters), sort_keys=True, default=str),
    }


def run_batch(
    specs: Sequence[NotebookRun],
    executor: Executor | None = None,
    *,
    summary_path: Path | None = None,
    fail_fast: bool = False,
) -> pd.DataFrame:
    """Execute ``specs`` one after another and return the summary table.

    A failing notebook does not stop the others (unless ``fail_fast``, in which
    case the remaining ones are reported ``skipped``). Existing output files are
    moved aside, never overwritten (see :func:`move_aside`). If ``summary_path`` is
    given, the summary is also written there as CSV (an old one is moved aside).
    On Ctrl-C the summary so far is written before the interrupt propagates.

    Returns:
        DataFrame with columns ``notebook, status (ran|failed|skipped), seconds,
        output_path, error`` (first line of the error) and ``parameters`` (JSON).
    """
    executor = executor if executor is not None else LocalPapermillExecutor()
    if isinstance(executor, RayPapermillExecutor) and not fail_fast:
        return _run_concurrently(specs, executor, summary_path)
    rows: list[dict[str, Any]] = []
    skip_reason: str | None = None
    interrupted: KeyboardInterrupt | None = None
    for index, run in enumerate(specs, start=1):
        if skip_reason is not None:
            rows.append(_row(run, STATUS_SKIPPED, 0.0, skip_reason))
            continue
        logger.info("[%d/%d] %s -> %s %s", index, len(specs), run.path, run.output_path, dict(run.parameters))
        move_aside(run.output_path)
        Path(run.output_path).parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        try:
            executor.execute(run)
        except KeyboardInterrupt as exc:
            rows.append(_row(run, STATUS_FAILED, time.perf_counter() - start, "KeyboardInterrupt"))
            skip_reason, interrupted = "interrupted", exc
            continue
        except Exception as exc:  # noqa: BLE001 - one failing notebook must not stop the batch
            error = _first_line(exc)
            logger.error("%s failed: %s", run.path.name, error)
            rows.append(_row(run, STATUS_FAILED, time.perf_counter() - start, error))
            if fail_fast:
                skip_reason = f"not run: {run.path.name} failed (fail-fast)"
            continue
        seconds = time.perf_counter() - start
        if run.publish_path is not None and Path(run.publish_path).resolve() != Path(run.output_path).resolve():
            shutil.copyfile(run.output_path, run.publish_path)
            logger.info("copied executed %s to %s", run.path.name, run.publish_path)
        rows.append(_row(run, STATUS_RAN, seconds, ""))

    summary = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    _write_summary(summary, summary_path)
    if interrupted is not None:
        raise interrupted
    return summary


def _write_summary(summary: pd.DataFrame, summary_path: Path | None) -> None:
    if summary_path is not None:
        summary_path = Path(summary_path)
        summary_path.parent.mkdir(parents=True, exist_ok=True)
        move_aside(summary_path)
        summary.to_csv(summary_path, index=False)


def _run_concurrently(specs: Sequence[NotebookRun], executor: RayPapermillExecutor,
                      summary_path: Path | None) -> pd.DataFrame:
    """:func:`run_batch` with every notebook submitted at once (rows in the order of ``specs``)."""
    for run in specs:
        move_aside(run.output_path)
        Path(run.output_path).parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any] | None] = [None] * len(specs)

    def done(index: int, error: BaseException | None, seconds: float) -> None:
        run = specs[index]
        if error is not None:
            logger.error("%s failed: %s", run.path.name, _first_line(error))
            rows[index] = _row(run, STATUS_FAILED, seconds, _first_line(error))
            return
        if run.publish_path is not None and Path(run.publish_path).resolve() != Path(run.output_path).resolve():
            shutil.copyfile(run.output_path, run.publish_path)
        logger.info("[%d/%d] %s ran (%.1f s)", index + 1, len(specs), run.path.name, seconds)
        rows[index] = _row(run, STATUS_RAN, seconds, "")

    logger.info("submitting %d notebook(s) to %s", len(specs), executor.describe())
    executor.execute_all(specs, done)
    summary = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    _write_summary(summary, summary_path)
    return summary


def format_summary(summary: pd.DataFrame) -> str:
    """The summary as a plain-text table (without the parameters column)."""
    if summary.empty:
        return "(no notebooks)"
    shown = summary[["notebook", "status", "seconds", "output_path", "error"]].copy()
    shown["seconds"] = shown["seconds"].map(lambda s: f"{s:.1f}")
    return shown.to_string(index=False)


# ------------------------------------------------------------------------------ CLI


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m gped_kit.cli.batch`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m gped_kit.cli.batch",
        description="Execute the gped-kit notebooks headlessly with papermill, one after another.",
        epilog=(
            "Existing files in the output directory are renamed to <stem>.<YYYYmmdd-HHMMSS>.<ext> "
            "(the old file's modification time), never overwritten. Exit status: 0 if every "
            "notebook ran, 1 if any failed, 2 on usage errors."
        ),
    )
    parser.add_argument(
        "notebooks",
        nargs="*",
        metavar="NOTEBOOK",
        help="notebook paths, names in --notebook-dir or globs (default: every notebook there)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAMES",
        help="comma-separated notebook names/paths/globs to run (repeatable); same as NOTEBOOK",
    )
    parser.add_argument(
        "--notebook-dir",
        type=Path,
        default=DEFAULT_NOTEBOOK_DIR,
        help="where notebooks are discovered (default: %(default)s)",
    )
    parser.add_argument(
        "--profile",
        default=DEFAULT_PROFILE,
        help="value of the `profile` parameter for every notebook that declares it (default: %(default)s); "
        f"'{ALL_PROFILES}': every profile each notebook shows, the others first and '{DEFAULT_PROFILE}' last, "
        f"into <output-dir>/<profile>/",
    )
    parser.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="[NOTEBOOK:]KEY=VALUE",
        help="parameter override; VALUE is a JSON/YAML literal; with NOTEBOOK: only for that notebook; "
        "a KEY that no selected notebook (that NOTEBOOK) declares is an error, before anything runs",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=None,
        help=f"where executed notebooks and {SUMMARY_FILENAME} go (default: {DEFAULT_OUTPUT_ROOT}/<profile>)",
    )
    parser.add_argument(
        "--inplace",
        action="store_true",
        help="also copy each successfully executed notebook back over its source",
    )
    parser.add_argument(
        "--kernel",
        default=None,
        help=f"Jupyter kernel (default: {PROJECT_KERNEL!r} if registered, else {FALLBACK_KERNEL!r})",
    )
    parser.add_argument(
        "--cwd",
        type=Path,
        default=None,
        help="kernel working directory (default: each notebook's own folder)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="per-cell timeout in seconds (default: none)",
    )
    parser.add_argument("--executor", choices=ExecutorName.allowed(), default="local",
                        help="local: one notebook after another here; ray: each notebook a task on a Ray cluster "
                             "(see --ray-address)")
    parser.add_argument("--ray-address", default=None,
                        help="Ray cluster to join (default $RAY_ADDRESS; neither: start a local cluster)")
    parser.add_argument("--fail-fast", action="store_true", help="skip the remaining notebooks after a failure")
    parser.add_argument("--dry-run", action="store_true", help="list what would run, with parameters; run nothing")
    parser.add_argument("--log-output", action="store_true", help="echo cell outputs while running")
    parser.add_argument("-v", "--verbose", action="store_true", help="more logging")
    return parser


def main(argv: Sequence[str] | None = None, executor: Executor | None = None) -> int:
    """Command-line entry point; returns the exit status.

    ``executor`` replaces the default :class:`LocalPapermillExecutor` (for other
    engines and for tests); ``--kernel``, ``--timeout`` and ``--log-output`` then
    do not apply.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logger.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    logging.getLogger("papermill").setLevel(logging.INFO if args.verbose else logging.WARNING)

    selectors = list(args.notebooks) + [s.strip() for item in args.only for s in item.split(",") if s.strip()]
    if not selectors and not args.notebook_dir.is_dir():
        parser.error(f"notebook directory {args.notebook_dir} does not exist")
    try:
        notebooks = select_notebooks(selectors, args.notebook_dir)
        overrides = [parse_override(text) for text in args.param]
    except ValueError as exc:
        parser.error(str(exc))
    if not notebooks:
        logger.warning("no notebooks found in %s", args.notebook_dir)
        return 0

    output_dir = args.output_dir if args.output_dir is not None else DEFAULT_OUTPUT_ROOT / args.profile
    inspect = functools.cache(inspect_parameters)  # each parameters cell read once (errors are not cached)
    try:
        check_overrides(notebooks, overrides, inspect=inspect)
        if args.profile == ALL_PROFILES:
            runs = plan_all_profiles(notebooks, output_dir=output_dir, overrides=overrides, inplace=args.inplace,
                                     cwd=args.cwd, inspect=inspect)
        else:
            runs = plan_runs(
                notebooks,
                output_dir=output_dir,
                profile=args.profile,
                overrides=overrides,
                inplace=args.inplace,
                cwd=args.cwd,
                inspect=inspect,
            )
    except ValueError as exc:
        parser.error(str(exc))

    if executor is None:
        executor = LocalPapermillExecutor(
            kernel_name=args.kernel, timeout=args.timeout, log_output=args.log_output
        )
        if ExecutorName(args.executor) is ExecutorName.RAY:
            executor = RayPapermillExecutor(executor, address=args.ray_address)

    problems = check_runs(runs)
    if problems:
        parser.error("settings that cannot run (nothing was started):\n" + "\n".join(
            f"  {name}: {message}" for name, message in problems.items()))

    if args.dry_run:
        print(f"dry run: {len(runs)} notebook(s) with {executor.describe()}; nothing is executed")
        for run in runs:
            print(f"  {run.path} -> {run.output_path}")
            print(f"      cwd={run.working_dir}  parameters={json.dumps(dict(run.parameters), default=str)}")
            if run.publish_path is not None:
                print(f"      on success copied back to {run.publish_path}")
        return 0

    logger.info("running %d notebook(s) with %s", len(runs), executor.describe())
    summary_path = output_dir / SUMMARY_FILENAME
    summary = run_batch(runs, executor, summary_path=summary_path, fail_fast=args.fail_fast)
    print(format_summary(summary))
    print(f"summary written to {summary_path}")
    n_failed = int((summary["status"] == STATUS_FAILED).sum())
    if n_failed:
        print(f"{n_failed} of {len(summary)} notebook(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a batch of notebooks runs: the notebooks selected (:func:`select_notebooks`), one
:class:`~gped_kit.cli.executors.NotebookRun` per notebook and profile with the parameters it declares
(:func:`plan_runs`, :func:`plan_all_profiles`), and each registered notebook's settings and chains checked
before anything starts (:func:`check_runs`)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..experiments.registry import NOTEBOOKS
from ..experiments.registry import notebook as registered_notebook
from .executors import NotebookRun
from .parameters import PARAMETERS_TAG, ParameterOverride, inspect_parameters

#: The batch command's log (:mod:`gped_kit.cli.batch` sets its level).
logger = logging.getLogger("gped_kit.cli.batch")

DEFAULT_NOTEBOOK_DIR = Path("notebooks")
DEFAULT_PROFILE = "default"
#: ``--profile all``: every profile each notebook shows (its experiment's ``shown_profiles``).
ALL_PROFILES = "all"

_GLOB_CHARS = re.compile(r"[*?\[]")
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_MAX_ERROR_CHARS = 300


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
        ValueError: if two notebooks would write the same output file, or a notebook's output file is the
            notebook itself (``output_dir`` its folder): the batch would rename the source aside before running it.
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
            logger.warning("%s: could not inspect parameters (%s)", nb.name, first_line(exc))
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
        if output_path.resolve() == nb.resolve():
            raise ValueError(f"--output-dir {str(output_dir)!r} is the folder of {nb}: its executed copy would "
                             "replace the source notebook (renamed aside first, then not found to run); give "
                             "another --output-dir, and --inplace to copy each executed notebook back over its source")
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
            problems[name] = first_line(exc)
    return problems


def first_line(exc: BaseException) -> str:
    """The first line of an error's message, with its type, without terminal colours and at most
    :data:`_MAX_ERROR_CHARS` long (a notebook's failure as papermill reports it: its ``ename`` and ``evalue``)."""
    ename = getattr(exc, "ename", None)
    if ename:  # papermill.PapermillExecutionError
        text = f"{ename}: {getattr(exc, 'evalue', '')}"
    else:
        text = f"{type(exc).__name__}: {exc}"
    text = _ANSI_ESCAPE.sub("", text)
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    return line if len(line) <= _MAX_ERROR_CHARS else line[: _MAX_ERROR_CHARS - 3] + "..."

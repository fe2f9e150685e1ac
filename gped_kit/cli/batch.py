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

Checks
    A notebook records the outcome of each of its declared checks in its figures folder's manifest
    (:mod:`gped_kit.experiments.checks`). After the runs, every invariant a notebook that ran recorded as not
    holding is printed (:func:`failed_invariants`) and the exit status is 1, as for a notebook that failed.

Execution engines
    :mod:`gped_kit.cli.executors`: :class:`Executor` is the extension point (e.g. a
    cluster/queue engine); :class:`LocalPapermillExecutor` runs papermill in this process, one
    kernel per notebook, notebooks one after another; :class:`RayPapermillExecutor` submits
    each notebook as a Ray task.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
from filelock import FileLock, Timeout

from ..core.status import Status
from ..experiments.artifacts import read_manifest
from ..experiments.executors import ExecutorName
from ..files import atomic_path, new_file_path
from .executors import (
    FALLBACK_KERNEL,
    PROJECT_KERNEL,
    Executor,
    LocalPapermillExecutor,
    NotebookRun,
    RayPapermillExecutor,
)
from .parameters import check_overrides, inspect_parameters, parse_override, parse_value
from .plan import (
    ALL_PROFILES,
    DEFAULT_NOTEBOOK_DIR,
    DEFAULT_PROFILE,
    check_runs,
    first_line,
    plan_all_profiles,
    plan_runs,
    select_notebooks,
)

logger = logging.getLogger("gped_kit.cli.batch")

DEFAULT_OUTPUT_ROOT = Path("outputs") / "notebooks"
SUMMARY_FILENAME = "batch_summary.csv"

SUMMARY_COLUMNS = ("notebook", "status", "seconds", "output_path", "error", "parameters")


# -------------------------------------------------------------------------- running


def move_aside(path: Path) -> Path | None:
    """Rename an existing ``path`` to ``<stem>.<mtime stamp>[-N]<suffix>``, the first such name that is free.

    The name is taken by a hard link, which fails where the name exists, also where another run took it in
    the meantime (a check before a rename would let the later run replace the earlier's). Returns the new
    path, or ``None`` if ``path`` did not exist.
    """
    path = Path(path)
    try:
        stamp = datetime.fromtimestamp(path.stat().st_mtime).strftime("%Y%m%d-%H%M%S")
    except FileNotFoundError:
        return None
    counter = 1
    while True:
        target = path.with_name(f"{path.stem}.{stamp}{'' if counter == 1 else f'-{counter}'}{path.suffix}")
        try:
            os.link(path, target)
        except FileExistsError:
            counter += 1
            continue
        except FileNotFoundError:  # moved aside by another run in the meantime
            return None
        path.unlink(missing_ok=True)
        logger.info("kept previous %s as %s", path.name, target.name)
        return target


def output_lock(path: Path) -> FileLock:
    """The lock a run holds on its output notebook ``path`` (``<path>.lock``) from moving the old one aside until
    it is written: a second run writing the same path is refused at once (:func:`busy_error`), not interleaved."""
    path = Path(path)
    return FileLock(str(path.with_name(f"{path.name}.lock")), timeout=0)


def claim_output(held: ExitStack, run: NotebookRun) -> bool:
    """Take ``run``'s output lock (:func:`output_lock`) into ``held`` and move its old output aside; False, logged,
    when another run holds the lock (nothing is moved)."""
    Path(run.output_path).parent.mkdir(parents=True, exist_ok=True)
    try:
        held.enter_context(output_lock(run.output_path))
    except Timeout:
        logger.error("%s", busy_error(run))
        return False
    move_aside(run.output_path)
    return True


def busy_error(run: NotebookRun) -> str:
    """The error of a notebook not run because another run is writing its output path."""
    return (f"not run: another run is writing {run.output_path} (it holds {run.output_path}.lock); wait for it, "
            "or give another --output-dir")


def _row(run: NotebookRun, status: str, seconds: float, error: str) -> dict[str, Any]:
    return {
        "notebook": run.path.name,
        "status": status,
        "seconds": round(seconds, 2),
        "output_path": str(run.output_path) if status != Status.SKIPPED else "",
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
            rows.append(_row(run, Status.SKIPPED, 0.0, skip_reason))
            continue
        logger.info("[%d/%d] %s -> %s %s", index, len(specs), run.path, run.output_path, dict(run.parameters))
        with ExitStack() as held:
            if not claim_output(held, run):
                rows.append(_row(run, Status.FAILED, 0.0, busy_error(run)))
                continue
            start = time.perf_counter()
            try:
                executor.execute(run)
            except KeyboardInterrupt as exc:
                rows.append(_row(run, Status.FAILED, time.perf_counter() - start, "KeyboardInterrupt"))
                skip_reason, interrupted = "interrupted", exc
                continue
            except Exception as exc:  # noqa: BLE001 - one failing notebook must not stop the batch
                error = first_line(exc)
                logger.error("%s failed: %s", run.path.name, error)
                rows.append(_row(run, Status.FAILED, time.perf_counter() - start, error))
                if fail_fast:
                    skip_reason = f"not run: {run.path.name} failed (fail-fast)"
                continue
            seconds = time.perf_counter() - start
            if publish(run):
                logger.info("copied executed %s to %s", run.path.name, run.publish_path)
            rows.append(_row(run, Status.RAN, seconds, ""))

    summary = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    _write_summary(summary, summary_path)
    if interrupted is not None:
        raise interrupted
    return summary


def publish(run: NotebookRun) -> bool:
    """Copy ``run``'s executed notebook over its ``publish_path`` (``--inplace``: the source) as one rename, so that
    a reader (JupyterLab, another batch starting that notebook) sees the old notebook or the new one, never part
    of one; False where there is nothing to copy (no ``publish_path``, or it is the output itself)."""
    if run.publish_path is None or Path(run.publish_path).resolve() == Path(run.output_path).resolve():
        return False
    with atomic_path(run.publish_path) as tmp:
        shutil.copyfile(run.output_path, tmp)
    return True


def _write_summary(summary: pd.DataFrame, summary_path: Path | None) -> None:
    """Write ``summary`` whole to ``summary_path``, an earlier summary moved aside (also one another run wrote
    in the meantime: the new file is linked into place only where the name is free)."""
    if summary_path is None:
        return
    data = summary.to_csv(index=False).encode()
    while True:
        move_aside(summary_path)
        try:
            with new_file_path(summary_path) as tmp:
                tmp.write_bytes(data)
            return
        except FileExistsError:
            continue


def _run_concurrently(specs: Sequence[NotebookRun], executor: RayPapermillExecutor,
                      summary_path: Path | None) -> pd.DataFrame:
    """:func:`run_batch` with every notebook submitted at once (rows in the order of ``specs``); the output locks
    (:func:`output_lock`) are held here, where the notebooks are written, until every run is done."""
    with ExitStack() as held:
        rows: list[dict[str, Any] | None] = [None] * len(specs)
        free = []
        for index, run in enumerate(specs):
            if claim_output(held, run):
                free.append(index)
            else:
                rows[index] = _row(run, Status.FAILED, 0.0, busy_error(run))
        return _submit(specs, free, rows, executor, summary_path)


def _submit(specs: Sequence[NotebookRun], free: Sequence[int], rows: list[dict[str, Any] | None],
            executor: RayPapermillExecutor, summary_path: Path | None) -> pd.DataFrame:
    """Submit the runs ``free`` (indices into ``specs``) at once and fill their ``rows``; the summary."""

    def done(position: int, error: BaseException | None, seconds: float) -> None:
        index = free[position]
        run = specs[index]
        if error is not None:
            logger.error("%s failed: %s", run.path.name, first_line(error))
            rows[index] = _row(run, Status.FAILED, seconds, first_line(error))
            return
        publish(run)
        logger.info("[%d/%d] %s ran (%.1f s)", index + 1, len(specs), run.path.name, seconds)
        rows[index] = _row(run, Status.RAN, seconds, "")

    if free:
        logger.info("submitting %d notebook(s) to %s", len(free), executor.describe())
        executor.execute_all([specs[i] for i in free], done)
    summary = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    _write_summary(summary, summary_path)
    return summary


def failed_invariants(runs: Sequence[NotebookRun], summary: pd.DataFrame,
                      inspect: Callable[[Path], dict[str, Any] | None] = inspect_parameters) -> list[str]:
    """One line per invariant (:class:`~gped_kit.experiments.checks.Role`) that a notebook of ``runs`` which ran
    recorded as not holding: read from the manifest of the figures folder it wrote to (its ``figures_dir``
    parameter, given or the notebook's default, relative to its working directory) under its profile."""
    ran = {row.output_path for row in summary.itertuples() if row.status == Status.RAN}
    lines = []
    for run in runs:
        if str(run.output_path) not in ran:
            continue
        defaults = {k: parse_value(v) for k, v in (inspect(Path(run.path)) or {}).items()}
        given = {**defaults, **dict(run.parameters)}
        if "figures_dir" not in given:
            continue
        figures = Path(run.working_dir) / str(given["figures_dir"])
        profile = str(given.get("profile", "default"))
        for outcome in read_manifest(figures).outcomes(Path(run.path).stem, profile):
            if outcome.failed:
                lines.append(f"{Path(run.path).stem} ({profile}): invariant not holding: {outcome.line}")
    return lines


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
            "notebook ran and held its invariants, 1 if any failed or recorded an invariant as not holding, "
            "2 on usage errors."
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
                             "(see --ray-address); stored: one after another here, each notebook that declares an "
                             "`executor` parameter reading the store only, computing no chain (`-p executor=stored`)")
    parser.add_argument("--ray-address", default=None,
                        help="Ray cluster to join (default $RAY_ADDRESS; neither: start a local cluster)")
    parser.add_argument("--fail-fast", action="store_true", help="skip the remaining notebooks after a failure")
    parser.add_argument("--dry-run", action="store_true", help="list what would run, with parameters; run nothing")
    parser.add_argument("--log-output", action="store_true", help="echo cell outputs while running")
    parser.add_argument("-v", "--verbose", action="store_true", help="more logging")
    return parser


def check_run_options(args: argparse.Namespace) -> None:
    """``ValueError`` naming ``--timeout``, ``--cwd`` or ``--ray-address`` when it cannot be used, before any work:
    a timeout that is not a finite number of seconds > 0, a working directory that is not a folder, a Ray address
    without ``--executor ray`` (which alone joins a cluster)."""
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        raise ValueError(f"--timeout={args.timeout!r}: must be a finite number of seconds > 0 "
                         "(leave it out for no timeout)")
    if args.cwd is not None and not args.cwd.is_dir():
        raise ValueError(f"--cwd={str(args.cwd)!r}: not a directory; give an existing folder, or leave it out "
                         "(each notebook's own folder)")
    if args.ray_address is not None and ExecutorName(args.executor) is not ExecutorName.RAY:
        raise ValueError(f"--ray-address={args.ray_address!r}: only --executor ray joins a cluster; "
                         f"got --executor {args.executor}")


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
    try:
        check_run_options(args)
    except ValueError as exc:
        parser.error(str(exc))

    selectors = list(args.notebooks) + [s.strip() for item in args.only for s in item.split(",") if s.strip()]
    if not selectors and not args.notebook_dir.is_dir():
        parser.error(f"notebook directory {args.notebook_dir} does not exist")
    try:
        notebooks = select_notebooks(selectors, args.notebook_dir)
        overrides = [parse_override(text) for text in args.param]
    except ValueError as exc:
        parser.error(str(exc))
    if ExecutorName(args.executor) is ExecutorName.STORED:
        if any(o.key == "executor" for o in overrides):
            parser.error("--executor stored sets each notebook's `executor` parameter: give it or "
                         "-p executor=..., not both")
        overrides.append(parse_override(f"executor={ExecutorName.STORED.value}"))
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
    n_failed = int((summary["status"] == Status.FAILED).sum())
    broken = failed_invariants(runs, summary, inspect)
    for line in broken:
        print(line, file=sys.stderr)
    if n_failed:
        print(f"{n_failed} of {len(summary)} notebook(s) failed", file=sys.stderr)
    return 1 if n_failed or broken else 0


if __name__ == "__main__":
    sys.exit(main())

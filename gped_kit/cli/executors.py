"""How one notebook is executed: the run's description (:class:`NotebookRun`) and the engines that
execute it (:class:`Executor`): papermill in this process (:class:`LocalPapermillExecutor`) or each
notebook a task on a Ray cluster (:class:`RayPapermillExecutor`). What to run, with which
parameters, and the command line are :mod:`gped_kit.cli.batch`."""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import papermill
from jupyter_client.kernelspec import KernelSpecManager

from ..experiments.executors import connect_ray
from ..progress import PROGRESS_ENV, progress_mode

PROJECT_KERNEL = "gped-kit"
FALLBACK_KERNEL = "python3"


@dataclass(frozen=True)
class NotebookRun:
    """One notebook execution.

    Attributes:
        path: Source notebook.
        parameters: Values injected by papermill after the ``parameters`` cell.
        output_path: Where the executed copy is written.
        cwd: Working directory of the kernel; ``None`` means the notebook's own
            folder, so relative paths behave as in JupyterLab.
        publish_path: If set, a successfully executed notebook is also copied
            there (``--inplace`` sets it to ``path``).
    """

    path: Path
    parameters: Mapping[str, Any]
    output_path: Path
    cwd: Path | None = None
    publish_path: Path | None = None

    @property
    def name(self) -> str:
        """The notebook's file name without ``.ipynb``."""
        return self.path.stem

    @property
    def working_dir(self) -> Path:
        """The directory the kernel runs in."""
        return self.cwd if self.cwd is not None else self.path.parent

    def absolute(self) -> NotebookRun:
        """The same run with every path absolute, as this process sees it: for a worker of a cluster, whose working
        directory is its own, not the submitting process's."""
        return replace(self, path=Path(self.path).absolute(), output_path=Path(self.output_path).absolute(),
                       cwd=Path(self.working_dir).absolute(),
                       publish_path=None if self.publish_path is None else Path(self.publish_path).absolute())



class Executor(ABC):
    """Executes one notebook; the pluggable engine behind :func:`run_batch`.

    Implementations write the executed notebook to ``run.output_path`` (also when
    execution fails, if they can) and raise an exception if the notebook failed.
    """

    @abstractmethod
    def execute(self, run: NotebookRun) -> None:
        """Execute ``run``; raise on failure."""

    def describe(self) -> str:
        """One line naming the engine, for logs and dry runs."""
        return type(self).__name__


@dataclass
class LocalPapermillExecutor(Executor):
    """Runs notebooks with ``papermill.execute_notebook`` in this process.

    Attributes:
        kernel_name: Jupyter kernel to use; ``None`` picks
            :func:`default_kernel_name` (``gped-kit`` if registered, else ``python3``).
        timeout: Per-cell execution timeout in seconds (``None``: no limit).
        start_timeout: Seconds to wait for the kernel to start.
        log_output: Echo cell outputs to papermill's logger while running.
        progress_bar: Show papermill's per-cell progress bar.
        matplotlib_backend: Passed to IPython kernels as ``--matplotlib=...`` so
            figures end up in the executed notebook even when the environment sets
            ``MPLBACKEND=Agg`` (which IPython kernels would otherwise honour).
            ``None`` leaves the kernel's default.
        progress: The kit's progress display in the kernel (``$GPED_PROGRESS``): ``"off"``
            (default) keeps progress and status lines out of the executed notebook (a bar would
            freeze there, and lines are clutter to its readers; ``log_output`` echoes what the
            cells print); ``"lines"`` saves short text lines into it; ``None`` leaves the
            environment's choice.
    """

    kernel_name: str | None = None
    timeout: float | None = None
    start_timeout: float = 60.0
    log_output: bool = False
    progress_bar: bool = False
    matplotlib_backend: str | None = "inline"
    progress: str | None = "off"

    def resolved_kernel_name(self) -> str:
        """The kernel this executor will start."""
        return self.kernel_name or default_kernel_name()

    def describe(self) -> str:
        return f"papermill (local, kernel {self.resolved_kernel_name()!r})"

    def execute(self, run: NotebookRun) -> None:
        extra_arguments = []
        if self.matplotlib_backend:
            extra_arguments.append(f"--matplotlib={self.matplotlib_backend}")
        # Absolute paths: papermill saves the output while chdir'ed into cwd.
        with _environment({PROGRESS_ENV: str(progress_mode(self.progress))} if self.progress else {}):
            papermill.execute_notebook(
                str(Path(run.path).absolute()),
                str(Path(run.output_path).absolute()),
                parameters=dict(run.parameters),
                kernel_name=self.resolved_kernel_name(),
                cwd=str(Path(run.working_dir).absolute()),
                execution_timeout=self.timeout,
                start_timeout=self.start_timeout,
                log_output=self.log_output,
                progress_bar=self.progress_bar,
                extra_arguments=extra_arguments,
            )


def _execute_timed(executor: Executor, run: NotebookRun) -> float:
    """On a worker: execute ``run`` with ``executor``; the seconds it took."""
    start = time.perf_counter()
    executor.execute(run)
    return time.perf_counter() - start


@dataclass
class RayPapermillExecutor(Executor):
    """Each notebook a task on a Ray cluster, executed there by ``local`` (papermill on the
    worker). All notebooks are submitted at once and run as the cluster has room (one CPU each,
    plus ``gpus_per_notebook``); the notebooks, their outputs and the results store must be on a
    file system every node sees at the same path, and each run is sent with its paths made absolute on the
    submitting side (:meth:`NotebookRun.absolute`), since a worker's working directory is its own. ``address`` as
    :func:`gped_kit.experiments.executors.connect_ray` (default ``$RAY_ADDRESS``, else a local cluster)."""

    local: LocalPapermillExecutor = field(default_factory=LocalPapermillExecutor)
    address: str | None = None
    gpus_per_notebook: float = 0.0

    def describe(self) -> str:
        where = self.address or os.environ.get("RAY_ADDRESS") or "local cluster"
        return f"Ray ({where}), {self.local.describe()} on each worker"

    def execute(self, run: NotebookRun) -> None:
        errors: list[BaseException] = []
        self.execute_all([run], lambda index, error, seconds: errors.append(error) if error else None)
        if errors:
            raise errors[0]

    def execute_all(self, runs: Sequence[NotebookRun],
                    on_done: Callable[[int, BaseException | None, float], None]) -> None:
        """Submit every run; call ``on_done(index, error or None, seconds)`` as each finishes."""
        ray = connect_ray(self.address)
        remote = ray.remote(_execute_timed).options(num_cpus=1, num_gpus=self.gpus_per_notebook, max_retries=1,
                                                    retry_exceptions=False)
        started = time.perf_counter()
        pending = {remote.remote(self.local, run.absolute()): index for index, run in enumerate(runs)}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                index = pending.pop(ref)
                try:
                    on_done(index, None, float(ray.get(ref)))
                except Exception as exc:  # noqa: BLE001 -- the notebook's failure, reported like a local one
                    cause = getattr(exc, "cause", None)
                    on_done(index, cause if isinstance(cause, BaseException) else exc, time.perf_counter() - started)


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables (inherited by the kernels started meanwhile), then restore them."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def default_kernel_name() -> str:
    """``gped-kit`` if that Jupyter kernel is registered, else ``python3``."""
    try:
        specs = KernelSpecManager().find_kernel_specs()
    except Exception:  # noqa: BLE001 - any failure means "not registered"
        return FALLBACK_KERNEL
    return PROJECT_KERNEL if PROJECT_KERNEL in specs else FALLBACK_KERNEL

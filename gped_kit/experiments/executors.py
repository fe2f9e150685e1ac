"""Where chain batches run: in this process, or as tasks on a Ray cluster.

:func:`~gped_kit.experiments.chains.run_chains` decides, on the driver, which tasks are reused
from the store and how the rest form batches; an executor then computes the batches:

* ``"local"`` (:class:`LocalExecutor`): one after another in this process;
* ``"stored"`` (:class:`StoredOnly`): nothing is computed; what the store holds is read back and
  every missing result is reported ``not stored`` (a notebook showing another profile's stored
  results beside its own, without ever starting that profile's chains);
* ``"ray"`` (:class:`RayExecutor`): each batch is one Ray task that requests its resources (one
  GPU when the batch's device is CUDA, one CPU otherwise), reads its data on the worker, computes
  through the same store (a shared directory: every node must see ``store.root`` at the same
  path) and reports its status. Results are the local run's: the batch runs the same code from
  the same entry (a chain's random streams depend only on its seed). A worker that dies mid-batch
  (killed, node lost) is retried by Ray (``max_retries``), and the retry resumes from the entry's
  last checkpoint; a batch that fails for a real reason (divergence, missing data) is recorded as
  failed and the grid goes on, as locally.

Ray is optional (``pip install -e .[cluster]``); :func:`connect_ray` joins the cluster at
``address`` (or ``$RAY_ADDRESS``) or starts a local one (docs/cluster.md).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.options import Option, parse_option


class ExecutorName(Option):
    """Where chain batches (and notebooks) run: this process or a Ray cluster; ``stored``: nowhere,
    only what the store holds is read (chains and derived results, not notebooks)."""

    LOCAL = "local"
    RAY = "ray"
    STORED = "stored"


class ChainExecutor(ABC):
    """Runs jobs -- a module-level function applied to argument tuples -- and reports each
    result as it finishes."""

    @abstractmethod
    def map(self, fn: Callable[..., Any], jobs: Sequence[tuple], gpus: Sequence[bool],
            on_done: Callable[[int, Any], None]) -> None:
        """Compute ``fn(*jobs[i])`` for every i (``gpus[i]``: the job wants one GPU); call
        ``on_done(i, result)`` as each finishes."""

    def describe(self) -> str:
        return type(self).__name__


class LocalExecutor(ChainExecutor):
    """Jobs one after another in this process."""

    def map(self, fn, jobs, gpus, on_done) -> None:
        for index, args in enumerate(jobs):
            on_done(index, fn(*args))


class StoredOnly(ChainExecutor):
    """Computes nothing: :func:`~gped_kit.experiments.chains.run_chains` and
    :func:`~gped_kit.experiments.derived.run_derived` read back what the store holds and report the
    rest as ``not stored``."""

    def map(self, fn, jobs, gpus, on_done) -> None:
        if jobs:
            raise RuntimeError("executor='stored' computes nothing; run_chains and run_derived never hand it a job")


def ray_module() -> Any:
    """The ``ray`` module, or ImportError saying how to install it."""
    try:
        import ray  # noqa: PLC0415 -- optional dependency
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("executor='ray' needs Ray: pip install -e '.[cluster]' (or pip install ray)") from exc
    return ray


def connect_ray(address: str | None = None, **init_options: Any) -> Any:
    """Join the Ray cluster at ``address`` (e.g. ``"10.0.0.1:6379"`` or ``"auto"``; default
    ``$RAY_ADDRESS``); when neither is given, Ray joins the cluster the last ``ray start`` on this
    machine recorded, else starts a local one. A no-op when already connected. Returns the ``ray``
    module.

    A cluster that uses token authentication (``ray start`` turns it on whenever a token exists in
    ``~/.ray/auth_token``, and any local ``ray.init()`` writes one) refuses a process that joins by
    address without ``RAY_AUTH_MODE=token``; that ``ConnectionError`` is raised with the way out
    (docs/cluster.md), Ray's error chained."""
    ray = ray_module()
    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS") or None
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=True, **init_options)
        except ConnectionError as exc:
            if os.environ.get("RAY_AUTH_MODE", "").lower() == "token" or not _authentication_refused(exc):
                raise
            raise ConnectionError(
                f"the Ray cluster at {address} refused this process: it uses token authentication and this process "
                "sends no token. Set RAY_AUTH_MODE=token here (the cluster's token must be in ~/.ray/auth_token or "
                "$RAY_AUTH_TOKEN) and run again; docs/cluster.md shows the commands. Ray's error is chained as the "
                "cause.") from exc
    return ray


def _authentication_refused(exc: BaseException) -> bool:
    """Whether Ray's connection error was caused by a missing or wrong authentication token."""
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return any(type(e).__name__ == "AuthenticationError" or "InvalidAuthToken" in str(e) for e in chain)


@dataclass
class RayExecutor(ChainExecutor):
    """Each batch a Ray task (see the module docstring). ``address`` as :func:`connect_ray`;
    ``max_retries`` how often Ray reruns a batch whose worker died."""

    address: str | None = None
    max_retries: int = 3

    def describe(self) -> str:
        return f"Ray ({self.address or os.environ.get('RAY_ADDRESS') or 'local cluster'})"

    def map(self, fn, jobs, gpus, on_done) -> None:
        if not jobs:  # nothing to compute: no cluster is joined or started
            return
        ray = connect_ray(self.address)
        remote = ray.remote(fn)
        pending = {}
        for index, (args, gpu) in enumerate(zip(jobs, gpus)):
            options: dict[str, Any] = {"max_retries": self.max_retries, "retry_exceptions": False, "num_cpus": 1}
            if gpu:
                options["num_gpus"] = 1
            pending[remote.options(**options).remote(*args)] = index
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                on_done(pending.pop(ref), ray.get(ref))


def make_executor(executor: str | ExecutorName | ChainExecutor, address: str | None = None) -> ChainExecutor:
    """``"local"``, ``"ray"`` (with ``address``), ``"stored"`` or an executor object."""
    if isinstance(executor, ChainExecutor):
        return executor
    name = parse_option(ExecutorName, executor, "executor")
    if name is ExecutorName.STORED:
        return StoredOnly()
    return LocalExecutor() if name is ExecutorName.LOCAL else RayExecutor(address)

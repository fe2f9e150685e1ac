"""Measured rates of chains on a device: what the work units' planner (:mod:`~gped_kit.experiments.units`)
sizes and orders its units by.

A **rate** is chain-steps per second: K chains of T steps that ran as one batch in S seconds did K T / S. It is
kept per *device kind* (a slug of the device's name: ``nvidia-h200``, ``cpu``; :func:`device_kind`) and
*workload*: the data set, the teacher's model, its number of students and the number of chains in the batch.

**Where the measurements come from** (:meth:`RateTable.read`), best first when two describe the same thing:

1. ``units``: the rows ``python -m gped_kit.cli.units run`` writes into the store, one file per run
   (``<store>/units/rates-<time>-<device>-<id>.csv``, :class:`RateRecorder`): a finished unit's device, workload,
   steps and wall time (data, chains, evaluations and store writes), one process on the device;
2. ``device run``: the runs committed under ``docs/device-runs/`` (:mod:`~gped_kit.experiments.device_runs`):
   the history of Table 1's chain of a model, a row every log interval with its elapsed time. Those runs put
   two chains side by side for much of their time, so a history has two levels of steps/s; the rate taken is
   the chain **alone**: the median of the intervals at the run's fastest level (within 10% of its 90th
   percentile), with how many intervals that is in its label;
3. ``store``: every complete chain entry (``entry.json``: ``steps``, ``seconds`` (the engine's time over the
   chain's whole life, slices added up), ``device``, ``batched_with``; its summary: data set, model, students),
   the median over the entries of one workload. What else ran on the device then is not recorded, and an entry
   made on CUDA names no GPU model (kind ``cuda``). Pooled teachers are left out.

**A workload without a measurement** (:meth:`RateTable.rate`) takes the nearest one measured -- the same device
kind first, then the same model, data set and number of students -- and says so in the rate's label
(``no measurement for ...; assumed from ...``); it is never made up silently. Batching is counted only as far
as it was measured: for K chains with a measurement at K' < K the chain-steps/s of K' are assumed (no further
gain), with one at K' > K the iterations/s of K' (a smaller batch is not slower per iteration). With no
measurement on any device there is no rate (None), and the planner says so.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import socket
import statistics
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import pandas as pd
import torch

from ..engine import resolve_device
from ..files import atomic_write_bytes
from .device_runs import DEVICE_RUNS, newest_runs
from .store import ENTRY_FILE

#: The sources of measurements, best first (see the module docstring).
SOURCES = ("units", "device run", "store")
#: The folder of the store that holds the units' rate files, and their names.
UNITS_FOLDER = "units"
RATE_FILES = "rates-*.csv"
#: A device run's fastest level: intervals within this share of its 90th percentile of steps/s.
FASTEST_LEVEL = 0.9


def slug(name: str) -> str:
    """A device's name as a kind: lower case, runs of other characters as one ``-`` (``NVIDIA H200`` ->
    ``nvidia-h200``)."""
    return re.sub(r"[^a-z0-9]+", "-", str(name).lower()).strip("-")


def device_kind(device: str | torch.device = "auto") -> tuple[str, str]:
    """The kind (:func:`slug`) and the full name of ``device`` (``"auto"``: CUDA when present): a GPU's model
    name (``torch.cuda.get_device_name``), or ``"cpu"``."""
    resolved = resolve_device(device)
    if resolved.type == "cuda":
        name = torch.cuda.get_device_name(resolved)
        return slug(name), name
    return resolved.type, resolved.type


def is_gpu(kind: str) -> bool:
    return kind != "cpu"


@dataclass(frozen=True)
class Workload:
    """What a rate is measured for: the data set, the teacher's model, students per chain, chains per batch."""

    dataset: str
    model: str
    students: int
    chains: int = 1

    def describe(self) -> str:
        return (f"{self.model} on {self.dataset or 'its data'}, {self.students} student"
                f"{'s' * (self.students != 1)}, {self.chains} chain{'s' * (self.chains != 1)}")


@dataclass(frozen=True)
class Measurement:
    """One measured rate: the device kind, the workload, chain-steps per second, its source (:data:`SOURCES`),
    where it was read (a file, an entry, a run's folder) and when it was made (text, sortable)."""

    device: str
    workload: Workload
    chain_steps_per_s: float
    source: str
    where: str
    made: str = ""


@dataclass(frozen=True)
class Rate:
    """The rate the planner uses for a unit: chain-steps per second; ``basis``, the measurement it comes from
    (device, workload, rate, source); ``assumed`` when that measurement is not of exactly this device and
    workload, with ``differs`` saying in what (and how the rate was carried over)."""

    chain_steps_per_s: float
    basis: str
    assumed: bool = False
    differs: str = ""

    @property
    def label(self) -> str:
        if not self.assumed:
            return f"measured: {self.basis}"
        return f"assumed from {self.basis}, for {self.differs}"

    def seconds(self, chains: int, steps: int) -> float:
        """Predicted wall time of ``chains`` chains of ``steps`` steps each."""
        return chains * steps / self.chain_steps_per_s


# ------------------------------------------------------------------------------ reading measurements
def _summary_head(path: Path) -> tuple[str, str, int, int] | None:
    """(data set, model, students, pooled chains) from a chain entry's summary (one row per student)."""
    if not path.is_file():
        return None
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return None
    first = rows[0]
    pooled = int(float(first.get("num_chains") or 1))
    return first.get("dataset", ""), first.get("model", ""), len(rows), pooled


def store_measurements(store_root: str | Path) -> list[Measurement]:
    """One measurement per complete chain entry of the store with its steps and seconds (see the module
    docstring, source ``store``); pooled teachers are left out."""
    out = []
    for meta_file in sorted(Path(store_root).glob(f"chain/*/{ENTRY_FILE}")):
        if ".old-" in meta_file.parent.name:
            continue
        try:
            meta = json.loads(meta_file.read_text())
        except (OSError, ValueError):
            continue
        steps, seconds = meta.get("steps"), meta.get("seconds")
        if not meta.get("complete") or not steps or not seconds or seconds <= 0:
            continue
        head = _summary_head(meta_file.parent / "summary.csv")
        if head is None or head[3] > 1:
            continue
        dataset, model, students, _ = head
        chains = int(meta.get("batched_with") or 1)
        device = slug(meta.get("device_name") or meta.get("device") or "unknown")
        out.append(Measurement(device, Workload(dataset, model, students, chains), chains * steps / seconds,
                               "store", f"{meta_file.parent.parent.name}/{meta_file.parent.name}",
                               str(meta.get("made", ""))))
    return out


def run_device(folder: Path) -> str:
    """The device kind of a run folder named ``<date>-<device>[-<n>]`` (``2026-11-26-nvidia-h200-2``)."""
    name = re.sub(r"^\d{4}-\d{2}-\d{2}-", "", folder.name)
    return re.sub(r"-\d{1,2}$", "", name)


def interval_rates(history: pd.DataFrame) -> pd.Series:
    """Steps per second between consecutive log points of a chain's history (one row per step and student)."""
    points = history.groupby("step")["elapsed_s"].first().sort_index()
    steps, seconds = points.index.to_series().diff(), points.diff()
    rates = (steps / seconds)[seconds > 0]
    return rates.dropna()


def device_run_measurements(repo_root: str | Path) -> list[Measurement]:
    """Per model, the newest committed GPU run's rate alone on the device (see the module docstring, source
    ``device run``)."""
    out = []
    for model, run in newest_runs(Path(repo_root)).items():
        history = run.history()
        rates = interval_rates(history)
        if rates.empty:
            continue
        level = rates[rates >= FASTEST_LEVEL * rates.quantile(0.9)]
        students = int(history["student"].nunique()) if "student" in history else 0
        where = (f"{DEVICE_RUNS.as_posix()}/{run.name}: {len(level)} of {len(rates)} log intervals at its fastest "
                 "level (alone on the device)")
        out.append(Measurement(run_device(run.path.parent), Workload("mnist", model, students, 1),
                               float(level.median()), "device run", where, run.name[:10]))
    return out


#: The columns of a units' rate file, in order.
RATE_COLUMNS = ("made", "device", "device_name", "notebook", "unit", "dataset", "model", "students", "chains",
                "steps", "seconds", "chain_steps_per_s", "status", "torch", "host")


def unit_measurements(store_root: str | Path) -> list[Measurement]:
    """Every row of the store's units' rate files (source ``units``)."""
    out = []
    for path in sorted((Path(store_root) / UNITS_FOLDER).glob(RATE_FILES)):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                try:
                    rate = float(row["chain_steps_per_s"])
                    workload = Workload(row["dataset"], row["model"], int(row["students"]), int(row["chains"]))
                except (KeyError, TypeError, ValueError):
                    continue
                if math.isfinite(rate) and rate > 0:
                    out.append(Measurement(row["device"], workload, rate, "units",
                                           f"{UNITS_FOLDER}/{path.name}: {row.get('unit', '')}", row.get("made", "")))
    return out


# ------------------------------------------------------------------------------ the table
@dataclass(frozen=True)
class _Group:
    """Measurements of one device, workload and source: their median rate, count and newest date."""

    device: str
    workload: Workload
    source: str
    rate: float
    count: int
    made: str
    where: str


def _groups(measurements: Iterable[Measurement]) -> list[_Group]:
    by: dict[tuple, list[Measurement]] = {}
    for m in measurements:
        by.setdefault((m.device, m.workload, m.source), []).append(m)
    out = []
    for (device, workload, source), ms in by.items():
        newest = max(ms, key=lambda m: m.made)
        where = newest.where if len(ms) == 1 else f"{len(ms)} measurements, the newest {newest.where}"
        out.append(_Group(device, workload, source, statistics.median(m.chain_steps_per_s for m in ms), len(ms),
                          newest.made, where))
    return out


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


class RateTable:
    """Measured rates (:class:`Measurement`) and the rate of any unit from them (see the module docstring)."""

    def __init__(self, measurements: Sequence[Measurement] = ()) -> None:
        for m in measurements:
            if m.source not in SOURCES:
                raise ValueError(f"Measurement.source={m.source!r} is not known; allowed: {list(SOURCES)}")
            if not (math.isfinite(m.chain_steps_per_s) and m.chain_steps_per_s > 0):
                raise ValueError(f"Measurement of {m.workload.describe()} on {m.device}: chain_steps_per_s="
                                 f"{m.chain_steps_per_s!r} must be a finite number > 0")
        self.measurements = list(measurements)
        self._groups = _groups(self.measurements)

    def __len__(self) -> int:
        return len(self.measurements)

    def __repr__(self) -> str:
        return f"RateTable({len(self)} measurements on {', '.join(self.devices()) or 'no device'})"

    @classmethod
    def read(cls, store_root: str | Path, repo_root: str | Path | None = None) -> RateTable:
        """The measurements of the store at ``store_root`` (its units' rate files and its chain entries) and of
        the GPU runs committed under ``repo_root`` (None: none)."""
        found = unit_measurements(store_root) + store_measurements(store_root)
        if repo_root is not None:
            found += device_run_measurements(repo_root)
        return cls(found)

    def with_measurement(self, measurement: Measurement) -> RateTable:
        """This table with ``measurement`` added (a unit that just finished)."""
        return RateTable([*self.measurements, measurement])

    def devices(self) -> list[str]:
        """The device kinds measured."""
        return sorted({m.device for m in self.measurements})

    def frame(self) -> pd.DataFrame:
        """One row per device, workload and source: the median rate, how many measurements, the newest."""
        rows = [{"device": g.device, **asdict(g.workload), "source": g.source, "chain_steps_per_s": round(g.rate, 1),
                 "measurements": g.count, "made": g.made, "where": g.where} for g in self._groups]
        return pd.DataFrame(rows)

    def rate(self, device: str, workload: Workload) -> Rate | None:
        """The rate of ``workload`` on ``device`` (a kind): measured, or assumed from the nearest measurement with
        a label saying which; None when nothing is measured at all."""
        if workload.chains < 1:
            raise ValueError(f"Workload.chains={workload.chains!r}: must be at least 1")
        if not self._groups:
            return None
        k = workload.chains

        def score(g: _Group) -> tuple:
            w = g.workload
            batch = (0, 0) if w.chains == k else (1, -w.chains) if w.chains < k else (2, w.chains)
            return (g.device != device, is_gpu(g.device) != is_gpu(device), g.device == "cuda",
                    w.model != workload.model, w.dataset != workload.dataset,
                    abs(w.students - workload.students), -w.students, batch, SOURCES.index(g.source),
                    _negated(g.made))

        best = min(self._groups, key=score)
        w = best.workload
        value = best.rate if w.chains <= k else best.rate * k / w.chains
        basis = f"{w.describe()} on {best.device}: {best.rate:,.0f} chain-steps/s [{best.source}: {best.where}]"
        if best.device == device and w == workload:
            return Rate(value, basis)
        differs = [f"{device}" if best.device != device else "",
                   f"model {workload.model}" if w.model != workload.model else "",
                   f"data {workload.dataset}" if w.dataset != workload.dataset else "",
                   _count(workload.students, "student") if w.students != workload.students else ""]
        if w.chains < k:
            differs.append(f"{_count(k, 'chain')} (batching gains beyond {_count(w.chains, 'chain')} not counted)")
        elif w.chains > k:
            differs.append(f"{_count(k, 'chain')} (at the iterations/s of {w.chains})")
        return Rate(value, basis, assumed=True, differs=", ".join(d for d in differs if d))


def _negated(text: str) -> tuple[int, ...]:
    """A key that sorts newer dates (sortable text) first."""
    return tuple(-ord(c) for c in text)


# ------------------------------------------------------------------------------ recording
class RateRecorder:
    """The rate file of one ``units run`` (``<store>/units/rates-<time>-<device>-<id>.csv``): every finished
    unit's row appended (:meth:`add`), the file rewritten whole each time (a crash leaves the rows before).
    One file per run, so runs on several machines never write to the same file."""

    def __init__(self, store_root: str | Path, device: str) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.path = Path(store_root) / UNITS_FOLDER / f"rates-{stamp}-{slug(device)}-{uuid.uuid4().hex[:4]}.csv"
        self.rows: list[dict] = []

    def add(self, device: str, device_name: str, notebook: str, unit: str, workload: Workload, steps: int,
            seconds: float, status: str = "finished") -> Measurement:
        """Record a unit's measurement (``workload.chains`` chains of ``steps`` steps computed in ``seconds``)
        and return it."""
        if not (steps > 0 and seconds > 0):
            raise ValueError(f"RateRecorder.add: steps={steps!r} and seconds={seconds!r} must be > 0")
        rate = workload.chains * steps / seconds
        made = time.strftime("%Y-%m-%d %H:%M:%S")
        row = {"made": made, "device": device, "device_name": device_name, "notebook": notebook, "unit": unit,
               **{f.name: getattr(workload, f.name) for f in fields(Workload)}, "steps": steps,
               "seconds": round(seconds, 2), "chain_steps_per_s": round(rate, 2), "status": status,
               "torch": torch.__version__, "host": socket.gethostname()}
        self.rows.append(row)
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=RATE_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.path, buffer.getvalue().encode())
        return Measurement(device, workload, rate, "units", f"{UNITS_FOLDER}/{self.path.name}: {unit}", made)


__all__ = ["SOURCES", "Workload", "Measurement", "Rate", "RateTable", "RateRecorder", "device_kind", "slug",
           "store_measurements", "device_run_measurements", "unit_measurements", "interval_rates", "run_device"]

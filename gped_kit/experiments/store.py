"""One results store for every stored result: chains, search students, Hydra, the thesis' toys.

The store is a directory ``root/<kind>/<key>/`` of *entries*. An entry's key is a hash
(:func:`gped_kit.core.schema.key_of`) of its kind, the record of the configuration that
produced it (:func:`gped_kit.core.schema.record`: fields at their defaults are left out, so
adding a field changes no key; the data's identity with checksums is part of it) and its
*numerics code* (:func:`~gped_kit.experiments.numerics.numerics_code`: the declared numerics
versions of its kind, e.g. ``"chain=1"``). A result for the same configuration and data under the
same numerics versions is reused; a change to the configuration, the data or a numerics version
gives a new key, so the result is recomputed and the old entry is left where it was. A change to
the code that keeps every number re-keys nothing (the golden tests check that it keeps them).

An entry holds tidy tables (``<name>.csv``), compact arrays (``arrays.npz``, compressed),
``entry.json`` (the record, the numerics code, the machine, torch version, device and time
that made it, and ``complete``) and, while it is computed, a ``checkpoint.pt`` (never
committed). ``entry.json`` is written last: an entry without ``"complete": true`` is an
interrupted computation, which the next run resumes from its checkpoint.

**Several processes and machines may share a store.** Every write goes to a uniquely named
temporary file in the entry's directory and is renamed over the target (atomic on POSIX), and
computing an entry holds a file lock (the ``filelock`` library) on ``<kind>/<key>.lock``: a
second process asking for the same entry waits, then reuses what the first one wrote. Nothing
is overwritten: ``recompute=True`` moves the old entry aside (``<key>.old-<time>-<id>``).

**Reading the current results.** Since a version bump leaves the old entries in place, a store can
hold several entries of one setting, one per numerics code that computed it. Whatever shows
results beside each other (a notebook's tables, figures and explorers) reads them with
``code=`` the current numerics code (:meth:`ResultsStore.entries`, :meth:`ResultsStore.load`):
per setting, the one entry the current numerics made, and none made by older ones.
"""

from __future__ import annotations

import io
import json
import os
import platform
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from filelock import FileLock

from ..core.schema import SCHEMA_VERSION, key_of
from ..core.status import Status
from ..files import atomic_write_bytes
from .numerics import numerics_code

ENTRY_FILE = "entry.json"
ARRAYS_FILE = "arrays.npz"
CHECKPOINT_FILE = "checkpoint.pt"
#: The hidden folder an entry moves through while :meth:`ResultsStore.rekey` moves it.
REKEY_PREFIX = ".rekey-"


def machine_description() -> dict[str, str]:
    """Where a result was made: host, platform, processor count, torch version."""
    return {"host": socket.gethostname(), "platform": platform.platform(), "cpus": str(os.cpu_count()),
            "torch": torch.__version__, "python": platform.python_version()}


class Entry:
    """One stored result (see the module docstring)."""

    def __init__(self, store: ResultsStore, kind: str, key: str, record: Any, code: str) -> None:
        self.store, self.kind, self.key, self.record, self.code = store, kind, key, record, code
        self.path = store.root / kind / key

    def __repr__(self) -> str:
        return f"Entry({self.kind}/{self.key}, {'complete' if self.complete else 'incomplete'})"

    @property
    def name(self) -> str:
        """``<kind>/<key>``: how the manifest names the entry (:mod:`gped_kit.experiments.artifacts`)."""
        return f"{self.kind}/{self.key}"

    @property
    def checkpoint(self) -> Path:
        return self.path / CHECKPOINT_FILE

    @property
    def meta(self) -> dict:
        """``entry.json`` (empty for an entry not yet written)."""
        f = self.path / ENTRY_FILE
        return json.loads(f.read_text()) if f.exists() else {}

    @property
    def complete(self) -> bool:
        return bool(self.meta.get("complete"))

    def table_names(self) -> list[str]:
        return sorted(f.stem for f in self.path.glob("*.csv"))

    def table(self, name: str) -> pd.DataFrame:
        f = self.path / f"{name}.csv"
        if not f.exists():
            raise KeyError(f"entry {self.kind}/{self.key} has no table {name!r}; it has {self.table_names()}")
        self.store.read_keys.add(self.name)
        return pd.read_csv(f)

    def write_table(self, name: str, frame: pd.DataFrame) -> None:
        if not name.isidentifier():
            raise ValueError(f"table name {name!r}: must be an identifier")
        atomic_write_bytes(self.path / f"{name}.csv", frame.to_csv(index=False).encode())

    def arrays(self) -> dict[str, np.ndarray]:
        f = self.path / ARRAYS_FILE
        if not f.exists():
            return {}
        self.store.read_keys.add(self.name)
        with np.load(f, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}

    def write_arrays(self, arrays: Mapping[str, np.ndarray | torch.Tensor], dtype: Any = np.float16) -> None:
        """Compressed arrays (floats stored as ``dtype``: compact results for figures). A float array with a finite
        value beyond ``dtype``'s range (e.g. an EnD² student's precision alpha_0 above float16's 65,504) is stored
        as float32 instead, never as inf."""
        out = {}
        for k, v in arrays.items():
            a = v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else np.asarray(v)
            if a.dtype.kind == "f" and dtype is not None:
                finite = np.abs(a[np.isfinite(a)])
                fits = not finite.size or finite.max() <= np.finfo(dtype).max
                a = a.astype(dtype if fits else np.float32)
            out[k] = a
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **out)
        atomic_write_bytes(self.path / ARRAYS_FILE, buffer.getvalue())

    def finish(self, seconds: float | None = None, device: str | None = None, **extra: Any) -> None:
        """Mark the entry complete (``entry.json``, written last) with what made it."""
        meta = {"schema": SCHEMA_VERSION, "kind": self.kind, "key": self.key, "complete": True, "code": self.code,
                "record": self.record, "made": time.strftime("%Y-%m-%d %H:%M:%S"), "seconds": seconds,
                "device": device, "machine": machine_description(), **extra}
        atomic_write_bytes(self.path / ENTRY_FILE, json.dumps(meta, indent=1, sort_keys=True, default=str).encode())

    def set_aside(self) -> Path:
        """Move the entry's directory aside (``<key>.old-<time>-<id>``) and return the new path."""
        target = self.path.with_name(f"{self.key}.old-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}")
        self.path.rename(target)
        return target


class ResultsStore:
    """A results store rooted at ``root`` (see the module docstring)."""

    def __init__(self, root: str | Path, lock_timeout: float = -1) -> None:
        self.root = Path(root)
        self.lock_timeout = lock_timeout
        #: The entries (``<kind>/<key>``) whose tables or arrays this store object has read: what a
        #: figure written after them rests on (recorded in the figures' manifest).
        self.read_keys: set[str] = set()

    def __repr__(self) -> str:
        return f"ResultsStore({str(self.root)!r})"

    def entry(self, kind: str, record: Any, code: str | None = None) -> Entry:
        """The entry of ``record`` computed by numerics ``code`` (default: this checkout's numerics code of
        ``kind``, :func:`~gped_kit.experiments.numerics.numerics_code`; it need not exist)."""
        if not (kind.isidentifier() and kind.islower()):
            raise ValueError(f"kind={kind!r}: must be a lower-case identifier")
        code = numerics_code(kind) if code is None else code
        return Entry(self, kind, key_of({"kind": kind, "record": record, "code": code}), record, code)

    def by_key(self, kind: str, key: str) -> Entry:
        """The stored entry ``<kind>/<key>`` (its record and code read from its ``entry.json``; it need not
        exist)."""
        meta = Entry(self, kind, key, None, "").meta
        return Entry(self, kind, key, meta.get("record"), meta.get("code", ""))

    @contextmanager
    def lock(self, entry: Entry) -> Iterator[None]:
        """Hold the entry's file lock (other processes asking for it wait)."""
        entry.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(entry.path.parent / f"{entry.key}.lock"), timeout=self.lock_timeout):
            yield

    @contextmanager
    def open(self, kind: str, record: Any, code: str | None = None, recompute: bool = False) -> Iterator[Entry]:
        """The entry of ``record`` under its lock, for reading (``entry.complete``) or computing;
        ``recompute`` sets a complete entry aside first, so it is computed afresh."""
        entry = self.entry(kind, record, code)
        with self.lock(entry):
            if recompute and entry.path.exists():
                entry.set_aside()
            entry.path.mkdir(parents=True, exist_ok=True)
            yield entry

    def cached(self, kind: str, record: Any, code: str | None, compute: Callable[[Entry], None],
               recompute: bool = False) -> tuple[Entry, Status]:
        """The entry of ``record``, computing it with ``compute(entry)`` (which writes its tables and
        arrays; the entry is then marked complete) unless it is stored already. Returns the entry
        and ``"reused"`` or ``"ran"``."""
        with self.open(kind, record, code, recompute) as entry:
            if entry.complete:
                return entry, Status.REUSED
            started = time.perf_counter()
            compute(entry)
            entry.finish(seconds=round(time.perf_counter() - started, 2))
            return entry, Status.RAN

    def entries(self, kind: str | None = None, complete: bool = True, code: str | None = None) -> list[Entry]:
        """Stored entries (of ``kind``), complete ones only by default; entries set aside and hidden folders
        (an entry being moved by :meth:`rekey`) are skipped.
        ``code``: only the entries made by that numerics code (e.g. the current one,
        :func:`~gped_kit.experiments.numerics.numerics_code`), i.e. one entry per setting, the current one."""
        kinds = [kind] if kind else sorted(p.name for p in self.root.glob("*") if p.is_dir())
        out = []
        for k in kinds:
            for path in sorted((self.root / k).glob("*")):
                if (not path.is_dir() or ".old-" in path.name or path.name.startswith(".")
                        or not (path / ENTRY_FILE).exists() and complete):
                    continue
                meta = json.loads((path / ENTRY_FILE).read_text()) if (path / ENTRY_FILE).exists() else {}
                entry = Entry(self, k, path.name, meta.get("record"), meta.get("code", ""))
                if (not complete or meta.get("complete")) and (code is None or entry.code == code):
                    out.append(entry)
        return out

    def rekey(self, kind: str, from_code: str, to_code: str | None = None,
              key_map: Mapping[str, str] | None = None) -> dict[str, str]:
        """Move every complete ``kind`` entry made by numerics code ``from_code`` to its key under ``to_code``
        (default: this checkout's, :func:`~gped_kit.experiments.numerics.numerics_code`) without recomputing
        it, for code whose numbers are declared the same (:data:`~gped_kit.experiments.numerics.LEGACY_CODES`).
        The entry's files move with it (checkpoints too); ``entry.json`` gets the new key and code and
        ``rekeyed_from`` (the old ones); ``key_map`` (old key -> new key of the results it is derived from,
        e.g. the chains') replaces those keys in its tables. An entry whose new key is taken already is left
        where it is. Each move happens under the new entry's lock, through a hidden folder
        (``.rekey-<old key>-<id>``) renamed into place, so readers see the old entry or the new one, never half
        of one; a move that was interrupted (its hidden folder left behind) is finished first. Returns
        {old key: new key} for every entry of ``from_code`` (moved or not)."""
        moved: dict[str, str] = {}
        for staging in sorted((self.root / kind).glob(f"{REKEY_PREFIX}*")):
            meta = json.loads((staging / ENTRY_FILE).read_text()) if (staging / ENTRY_FILE).is_file() else {}
            old_key, old_code = (meta["rekeyed_from"]["key"], meta["rekeyed_from"]["code"]) \
                if "rekeyed_from" in meta else (meta.get("key"), meta.get("code"))
            if not meta.get("complete") or old_code != from_code:
                continue
            new = self.entry(kind, meta["record"], to_code)
            moved[old_key] = new.key
            with self.lock(new):
                if staging.is_dir() and not new.path.exists():
                    self._move_into(staging, new, old_key, old_code, key_map)
        for old in self.entries(kind, code=from_code):
            new = self.entry(kind, old.record, to_code)
            moved[old.key] = new.key
            if new.key == old.key:
                continue
            with self.lock(new):
                if new.path.exists() or not old.path.is_dir():
                    continue
                staging = old.path.with_name(f"{REKEY_PREFIX}{old.key}-{uuid.uuid4().hex[:6]}")
                old.path.rename(staging)
                self._move_into(staging, new, old.key, old.code, key_map)
        return moved

    @staticmethod
    def _move_into(staging: Path, new: Entry, old_key: str, old_code: str,
                   key_map: Mapping[str, str] | None) -> None:
        """Finish one move of :meth:`rekey`: the tables name the new keys, ``entry.json`` the new key and code,
        and the folder takes the new entry's name. Each step can be done again (a move interrupted after
        some of them is finished by doing them all)."""
        for table in staging.glob("*.csv"):
            text = table.read_text()
            changed = text
            for before, after in (key_map or {}).items():
                changed = changed.replace(before, after)
            if changed != text:
                atomic_write_bytes(table, changed.encode())
        meta = json.loads((staging / ENTRY_FILE).read_text())
        meta.update(key=new.key, code=new.code, rekeyed_from={"key": old_key, "code": old_code})
        atomic_write_bytes(staging / ENTRY_FILE, json.dumps(meta, indent=1, sort_keys=True, default=str).encode())
        staging.rename(new.path)

    def load(self, table: str, kind: str, where: Callable[[Entry], bool] | None = None,
             code: str | None = None) -> pd.DataFrame:
        """One table of every complete ``kind`` entry (made by numerics code ``code``, when given,
        and that ``where`` accepts), concatenated, with the entry's key in column ``entry``; empty
        when there are none. ``code=`` the current numerics code reads only the current results
        (see the module docstring)."""
        frames = [e.table(table).assign(entry=e.key) for e in self.entries(kind, code=code)
                  if table in e.table_names() and (where is None or where(e))]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

"""Packs: the store files a job wrote, as compressed tar parts with a manifest of SHA-256 checksums, and their
unpacking into a store on the next node (docs/gpu.md).

:func:`pack` writes every given file of a store into parts of at most ``part_bytes`` (and, where the files must
fit a limit of your own, a transfer or a quota, at most ``max_files`` files and ``max_bytes`` in all) beside a
manifest ``slice-<sequence>-<time>.json``; :func:`changed_files` says which files a run made or changed
(:func:`store_state` before it). :func:`unpack` verifies every part and every file against the manifest before
anything is written, then places each entry's files under the entry's lock (the one the store's writers hold):
an entry the store has complete is kept whole, a checkpoint that is further on is kept, and ``overwrite`` sets
the store's entry aside whole instead. The command-line options of a run that packs what it writes
(:func:`add_pack_arguments`, :func:`resume_into`, :func:`pack_written`) are shared by ``slices``, ``units`` and
``speedups``.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
import time
import uuid
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from filelock import Timeout

from ..engine.checkpoint import read_checkpoint
from ..experiments.store import CHECKPOINT_FILE, ENTRY_FILE, REKEY_PREFIX, Entry, ResultsStore
from ..files import atomic_write_bytes, sha256_of, temporary_path

PACK_FORMAT = 1


MIB = 2**20


#: A pack's default part size (``--part-mib``): parts of at most 16 MiB, easy to copy between jobs.
PART_BYTES = 16 * MIB


#: Limits on a whole pack (``--max-files``, ``--max-mib``): none unless given, for a transfer or quota of yours.
MAX_FILES: int | None = None


MAX_BYTES: int | None = None


class PackError(RuntimeError):
    """A pack cannot be written (over the limits) or read (a part missing or damaged)."""


FileState = tuple[int, int, int]  # size, mtime_ns, inode: an atomic rewrite changes the inode


def _stored_files(root: Path) -> Iterator[Path]:
    """The store's files, without locks, temporary files, entries set aside and entries being re-keyed."""
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root)
        if (not f.is_file() or f.suffix == ".lock" or f.name.endswith(".tmp")
                or any(".old-" in p or p.startswith(REKEY_PREFIX) for p in rel.parts)):
            continue
        yield f


def store_state(root: Path) -> dict[str, FileState]:
    """Every stored file's size, modification time and inode, by path relative to ``root``."""
    out = {}
    for f in _stored_files(root):
        st = f.stat()
        out[f.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def _complete(entry_dir: Path) -> bool:
    f = entry_dir / ENTRY_FILE
    return f.is_file() and bool(json.loads(f.read_text()).get("complete"))


def changed_files(root: Path, before: Mapping[str, FileState], keep_final_checkpoints: bool) -> list[str]:
    """Files under ``root`` new or changed since ``before`` (:func:`store_state`), in pack order:
    per entry, ``entry.json`` last; checkpoints of complete entries only if ``keep_final_checkpoints``."""
    after = store_state(root)
    out = []
    for rel, state in after.items():
        if before.get(rel) == state:
            continue
        path = PurePosixPath(rel)
        if path.name == CHECKPOINT_FILE and not keep_final_checkpoints and _complete(root / path.parent):
            continue
        out.append(rel)
    return sorted(out, key=lambda r: (str(PurePosixPath(r).parent), PurePosixPath(r).name == ENTRY_FILE, r))


class _Parts(io.RawIOBase):
    """A write-only stream cut into files ``<stem>.tar.gz.<n>`` of at most ``size`` bytes."""

    def __init__(self, folder: Path, stem: str, size: int) -> None:
        self.folder, self.stem, self.size = folder, stem, size
        self.parts: list[dict] = []
        self._file: BinaryIO | None = None
        self._digest = hashlib.sha256()
        self._written = 0

    def writable(self) -> bool:
        return True

    def _roll(self) -> None:
        self._close_part()
        name = f"{self.stem}.tar.gz.{len(self.parts):03d}"
        self._file = open(self.folder / name, "xb")
        self.parts.append({"name": name, "bytes": 0, "sha256": ""})
        self._digest, self._written = hashlib.sha256(), 0

    def _close_part(self) -> None:
        if self._file is not None:
            self._file.close()
            self.parts[-1].update(bytes=self._written, sha256=self._digest.hexdigest())
            self._file = None

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            if self._file is None or self._written == self.size:
                self._roll()
            n = min(len(view) - done, self.size - self._written)
            chunk = view[done:done + n]
            self._file.write(chunk)
            self._digest.update(chunk)
            self._written += n
            done += n
        return done

    def close(self) -> None:
        self._close_part()
        super().close()


def pack(root: Path, files: Sequence[str], out: Path, info: Mapping[str, Any], part_bytes: int = PART_BYTES,
         max_files: int | None = MAX_FILES, max_bytes: int | None = MAX_BYTES) -> Path:
    """Pack ``files`` (paths relative to the store ``root``) into ``out`` as a gzip-compressed tar
    cut into parts of at most ``part_bytes`` and a manifest (``slice-<sequence>-<time>.json``:
    ``info``, the parts' and files' sizes and SHA-256 sums); returns the manifest's path.
    ``PackError`` (and nothing left in ``out``) when the parts and the manifest would be more than
    ``max_files`` files or ``max_bytes`` bytes (None: no such limit), naming the largest files."""
    if part_bytes < MIB:
        raise ValueError(f"part_bytes={part_bytes}: must be at least 1 MiB")
    out.mkdir(parents=True, exist_ok=True)
    stem = f"slice-{int(info.get('sequence', 1)):03d}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
    rows = [{"path": rel, "bytes": (root / rel).stat().st_size, "sha256": sha256_of(root / rel)} for rel in files]
    parts = _Parts(out, stem, part_bytes)
    try:
        with gzip.GzipFile(fileobj=parts, mode="wb", compresslevel=6, mtime=0) as gz, \
                tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for row in rows:
                member = tarfile.TarInfo(row["path"])
                member.size, member.mode, member.mtime = row["bytes"], 0o644, int(time.time())
                with open(root / row["path"], "rb") as f:
                    tar.addfile(member, f)
    finally:
        parts.close()
    total = sum(p["bytes"] for p in parts.parts)
    if (max_files is not None and len(parts.parts) + 1 > max_files) or (max_bytes is not None and total > max_bytes):
        for p in parts.parts:
            (out / p["name"]).unlink(missing_ok=True)
        largest = sorted(rows, key=lambda r: -r["bytes"])[:5]
        raise PackError(
            f"the slice's {len(rows)} files compress to {total / MIB:.1f} MiB in {len(parts.parts)} part(s) of at "
            f"most {part_bytes / MIB:.0f} MiB; with the manifest that is over the limit of "
            + " / ".join([*([f"{max_files} files"] if max_files is not None else []),
                          *([f"{max_bytes / MIB:.0f} MiB"] if max_bytes is not None else [])])
            + ". Largest files: "
            + ", ".join(f"{r['path']} ({r['bytes'] / MIB:.1f} MiB)" for r in largest)
            + ". Fewer chains per batch (each chain in progress keeps a checkpoint) or no final checkpoints "
              "(--no-final-checkpoints) make it smaller, or raise --max-files / --max-mib; the store itself is "
              "complete.")
    manifest = {"format": PACK_FORMAT, "kind": "gped-kit slice", "made": time.strftime("%Y-%m-%d %H:%M:%S"),
                **info, "parts": parts.parts, "files": rows, "bytes": total}
    path = out / f"{stem}.json"
    atomic_write_bytes(path, json.dumps(manifest, indent=1, default=str).encode())
    return path


def read_manifests(sources: Sequence[Path]) -> list[tuple[Path, dict]]:
    """The slice manifests in ``sources`` (folders or manifest files), oldest slice first. ``PackError`` naming
    the file for one that is absent or not a slice manifest (not JSON, another kind or format, a file that is
    not a relative path inside the store: :func:`member_path`)."""
    found = []
    for source in map(Path, sources):
        files = sorted(source.glob("slice-*.json")) if source.is_dir() else [source]
        for f in files:
            allowed = f"a slice manifest (slice-*.json) of format {PACK_FORMAT}"
            try:
                manifest = json.loads(f.read_text())
            except FileNotFoundError:
                raise PackError(f"{f}: no such file or folder; give a folder of packs or {allowed}") from None
            except (OSError, ValueError) as exc:  # not JSON, not text, not readable
                raise PackError(f"{f} is not {allowed}: {exc}") from None
            if (not isinstance(manifest, dict) or manifest.get("kind") != "gped-kit slice"
                    or manifest.get("format") != PACK_FORMAT):
                raise PackError(f"{f} is not {allowed}")
            try:
                for row in manifest["parts"]:
                    int(row["bytes"]), str(row["sha256"])
                    if not isinstance(row["name"], str) or Path(row["name"]).name != row["name"]:
                        raise ValueError(f"part {row['name']!r} is not a file name beside the manifest")
                for row in manifest["files"]:
                    int(row["bytes"]), str(row["sha256"])
                    member_path(f.name, row["path"])
            except (KeyError, TypeError, ValueError) as exc:
                raise PackError(f"{f} is not {allowed}: its parts or files are malformed ({exc!r})") from None
            found.append((f, manifest))
    return sorted(found, key=lambda fm: (fm[1].get("sequence", 0), fm[1].get("made", ""), fm[0].name))


def resume_sources(resume: Sequence[Path]) -> list[Path]:
    """The folders or manifests of ``resume`` that hold packs (absent or empty ones: none); ``PackError``
    naming ``--resume`` and the file when one is not a slice manifest."""
    out = []
    for r in map(Path, resume):
        try:
            if r.exists() and read_manifests([r]):
                out.append(r)
        except PackError as exc:
            raise PackError(f"--resume {r}: {exc}") from None
    return out


def next_sequence(previous: Sequence[tuple[Path, dict]]) -> int:
    """The sequence number of the pack that follows ``previous`` (:func:`read_manifests`)."""
    return 1 + max((m.get("sequence", 0) for _, m in previous), default=0)


class _Joined(io.RawIOBase):
    """The parts of a pack read as one stream."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self._paths = list(paths)
        self._file: BinaryIO | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while True:
            if self._file is None:
                if not self._paths:
                    return 0
                self._file = open(self._paths.pop(0), "rb")
            n = self._file.readinto(buffer)
            if n:
                return n
            self._file.close()
            self._file = None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        super().close()


def _checkpoint_step(path: Path) -> int:
    return int(read_checkpoint(path)["t"])


#: What :func:`unpack` did with a file of a pack, besides ``written`` and ``replaced``.
SAME = "same"


KEPT_COMPLETE = "kept (the store's entry is complete)"


KEPT_FURTHER = "kept (the store's checkpoint is further on)"


SET_ASIDE = "set aside"


def member_path(name: str, rel: Any) -> PurePosixPath:
    """``rel``, a file of the manifest ``name``, as a path inside the store; ``PackError`` unless it is a
    normalised relative path without ``.`` or ``..`` parts that names no lock, temporary file or entry set aside
    (so nothing is written outside the store, or over what the store keeps for itself)."""
    pure = PurePosixPath(rel) if isinstance(rel, str) else None
    if (pure is None or not pure.parts or pure.is_absolute() or pure.as_posix() != rel
            or any(p in (".", "..") or ".old-" in p for p in pure.parts)
            or pure.suffix in (".lock", ".tmp")):
        raise PackError(f"{name}: file {rel!r} is not one a pack holds (allowed: a relative path inside the store, "
                        "without '.' or '..' parts, naming no lock, temporary file or entry set aside)")
    return pure


def _entry_of(pure: PurePosixPath) -> tuple[str, str] | None:
    """``(kind, key)`` of the store entry a file belongs to (``<kind>/<key>/<file>``); None for a file outside
    entries (a rate file ``units/rates-*.csv``)."""
    return (pure.parts[0], pure.parts[1]) if len(pure.parts) >= 3 else None


@contextlib.contextmanager
def _entry_lock(store: ResultsStore, entry: Entry) -> Iterator[None]:
    """The entry's lock (:meth:`ResultsStore.lock`, the lock its writers hold while computing it): when another
    process holds it, say so and wait up to ``store.lock_timeout`` (negative: as long as it takes), then
    ``PackError`` naming the lock file."""
    lock_file = entry.path.parent / f"{entry.key}.lock"
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(ResultsStore(store.root, lock_timeout=0).lock(entry))
        except Timeout:
            print(f"waiting for {entry.name}: another process holds its lock ({lock_file})", file=sys.stderr)
            try:
                held.enter_context(store.lock(entry))
            except Timeout:
                raise PackError(f"{entry.name}: another process still holds its lock ({lock_file}) after "
                                f"{store.lock_timeout:g} s (it is computing that entry); nothing of it was "
                                "unpacked: unpack again once it is done") from None
        yield


def _extract(path: Path, manifest: dict, root: Path) -> dict[str, Path]:
    """Extract the pack of the manifest at ``path`` into hidden temporary files in the store's kind folders
    (beside the entries, never inside one), each checked against its size and SHA-256; returns them by path.
    ``PackError`` (and nothing left) when a member is not a file of the manifest, damaged or missing."""
    parts = [path.parent / p["name"] for p in manifest["parts"]]
    expected = {row["path"]: row for row in manifest["files"]}
    staged: dict[str, Path] = {}
    try:
        with _Joined(parts) as joined, gzip.GzipFile(fileobj=io.BufferedReader(joined), mode="rb") as gz, \
                tarfile.open(fileobj=gz, mode="r|") as tar:
            for member in tar:
                rel = member.name
                if rel not in expected or rel in staged or not member.isfile():
                    raise PackError(f"{path.name}: unexpected member {rel!r} (not a file of the manifest)")
                row, pure = expected[rel], PurePosixPath(rel)
                folder = root / pure.parts[0] if len(pure.parts) > 1 else root
                folder.mkdir(parents=True, exist_ok=True)
                tmp = staged[rel] = temporary_path(folder / f"unpack-{pure.name}")
                digest, size = hashlib.sha256(), 0
                with tar.extractfile(member) as src, open(tmp, "xb") as dst:
                    for block in iter(lambda: src.read(MIB), b""):
                        digest.update(block)
                        size += len(block)
                        dst.write(block)
                if size != row["bytes"] or digest.hexdigest() != row["sha256"]:
                    raise PackError(f"{path.name}: {rel} does not match its checksum")
        if set(staged) != set(expected):
            raise PackError(f"{path.name}: {len(set(expected) - set(staged))} file(s) of the manifest are not in "
                            "its parts")
    except (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        _discard(staged)
        raise PackError(f"{path.name}: its parts cannot be read as a pack ({exc})") from None
    except BaseException:
        _discard(staged)
        raise
    return staged


def _discard(staged: Mapping[str, Path]) -> None:
    for tmp in staged.values():
        tmp.unlink(missing_ok=True)


def _same(target: Path, row: Mapping[str, Any]) -> bool:
    return target.is_file() and target.stat().st_size == row["bytes"] and sha256_of(target) == row["sha256"]


def _place(tmp: Path, target: Path) -> str:
    """Move the verified ``tmp`` to ``target``; ``written`` or ``replaced``."""
    if target.is_dir():
        raise PackError(f"{target} is a folder in the store: a file of the pack cannot take its place")
    existed = target.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, target)
    return "replaced" if existed else "written"


def _place_entry(store: ResultsStore, kind: str, key: str, rows: Sequence[Mapping[str, Any]],
                 staged: Mapping[str, Path], overwrite: bool) -> list[tuple[str, str]]:
    """Place the pack's files ``rows`` of the entry ``<kind>/<key>`` under its lock: a complete entry of the
    store is kept whole (none of the pack's files is added to it), an incomplete one gets the pack's files but
    keeps a checkpoint that is further on; with ``overwrite``, where either would be kept, the store's entry is
    set aside whole (:meth:`Entry.set_aside`) and the pack's placed instead."""
    root = store.root
    entry = store.by_key(kind, key)
    with _entry_lock(store, entry):
        same = {row["path"]: _same(root / row["path"], row) for row in rows}
        complete = _complete(entry.path)
        further = [row["path"] for row in rows if not same[row["path"]]
                   and PurePosixPath(row["path"]).name == CHECKPOINT_FILE and (root / row["path"]).is_file()
                   and _checkpoint_step(root / row["path"]) > _checkpoint_step(staged[row["path"]])]
        keeps = (complete and not all(same.values())) or bool(further)
        actions: list[tuple[str, str]] = []
        if keeps and overwrite:
            old = entry.set_aside()
            actions.append((old.relative_to(root).as_posix(), SET_ASIDE))
            had = {f.name for f in old.iterdir()}
            for row in rows:
                action = _place(staged[row["path"]], root / row["path"])
                actions.append((row["path"], "replaced" if PurePosixPath(row["path"]).name in had else action))
            return actions
        for row in rows:
            rel = row["path"]
            if same[rel]:
                actions.append((rel, SAME))
            elif complete:
                actions.append((rel, KEPT_COMPLETE))
            elif rel in further:
                actions.append((rel, KEPT_FURTHER))
            else:
                actions.append((rel, _place(staged[rel], root / rel)))
        return actions


def unpack(sources: Sequence[Path], root: Path, overwrite: bool = False,
           lock_timeout: float = -1) -> list[tuple[str, str]]:
    """Extract the packs in ``sources`` (folders or manifests; oldest slice first) into the store at ``root``,
    after checking every manifest's file names and every part's size and SHA-256 (before anything is written),
    then every file's. Each entry's files are placed under the entry's lock (the one the store's writers hold
    while computing it; another process holding it is waited for up to ``lock_timeout`` seconds, negative: as
    long as it takes, then ``PackError``). Returns ``(path, action)`` per file: ``written``, ``replaced``,
    ``same`` or ``kept (...)``: an entry the store has complete is kept whole (none of the pack's files for it
    is written, so two draws never mix in one entry) and a checkpoint of the store that is further on is kept;
    with ``overwrite`` the store's entry is instead set aside whole as ``<key>.old-<time>-<id>``
    (:meth:`~gped_kit.experiments.store.Entry.set_aside`, an action ``set aside`` on that folder's path) and the
    pack's entry placed."""
    manifests = read_manifests(sources)
    store = ResultsStore(root, lock_timeout=lock_timeout)
    for path, manifest in manifests:
        parts = [path.parent / p["name"] for p in manifest["parts"]]
        for part, row in zip(parts, manifest["parts"]):
            if not part.is_file():
                raise PackError(f"{path.name}: part {row['name']} is missing; bring all {len(parts)} parts")
            if part.stat().st_size != row["bytes"] or sha256_of(part) != row["sha256"]:
                raise PackError(f"{path.name}: part {part.name} is damaged (size or SHA-256 differs from the manifest)")
    actions: list[tuple[str, str]] = []
    for path, manifest in manifests:
        staged = _extract(path, manifest, store.root)
        try:
            groups: dict[tuple[str, str] | None, list[dict]] = {}
            for row in manifest["files"]:
                entry = _entry_of(PurePosixPath(row["path"]))
                if entry is None:  # a file outside entries: placed alone, unless the same
                    target = store.root / row["path"]
                    actions.append((row["path"], SAME if _same(target, row) else _place(staged[row["path"]], target)))
                else:
                    groups.setdefault(entry, []).append(row)
            for (kind, key), rows in groups.items():
                actions += _place_entry(store, kind, key, rows, staged, overwrite)
        finally:
            _discard(staged)
    return actions


def action_summary(actions: Sequence[tuple[str, str]]) -> str:
    counts: dict[str, int] = {}
    for _, action in actions:
        counts[action] = counts.get(action, 0) + 1
    return ", ".join(f"{n} {a}" for a, n in sorted(counts.items())) or "nothing"


def add_pack_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a run that packs what it wrote: ``--resume``, which final checkpoints to pack, and the
    pack's part size and limits (:func:`pack_limits`)."""
    parser.add_argument("--resume", type=Path, action="append", default=[],
                        help="folder (or manifest) of earlier packs to unpack into the store first; absent or "
                             "empty: none (repeatable)")
    keep = parser.add_mutually_exclusive_group()
    keep.add_argument("--keep-final-checkpoints", dest="keep", action="store_true", default=None,
                      help="pack finished chains' checkpoints too (default: only for notebooks that need them)")
    keep.add_argument("--no-final-checkpoints", dest="keep", action="store_false")
    parser.add_argument("--part-mib", type=float, default=PART_BYTES / MIB,
                        help="largest part (default: %(default)s)")
    parser.add_argument("--max-files", type=int, default=MAX_FILES,
                        help="at most this many files, parts and manifest (default: no limit)")
    parser.add_argument("--max-mib", type=float, default=None,
                        help="at most this many MiB, all parts (default: no limit)")


def check_pack_options(args: argparse.Namespace) -> None:
    """``ValueError`` naming the first of :func:`add_pack_arguments`' options that is out of range, before any
    work (a part under 1 MiB, a limit that is not positive)."""
    if not args.part_mib >= 1:
        raise ValueError(f"--part-mib={args.part_mib!r}: a pack's parts must be at least 1 MiB")
    if args.max_files is not None and args.max_files < 1:
        raise ValueError(f"--max-files={args.max_files!r}: must be an integer >= 1")
    if args.max_mib is not None and not args.max_mib > 0:
        raise ValueError(f"--max-mib={args.max_mib!r}: must be a number of MiB > 0")


def pack_limits(args: argparse.Namespace) -> dict[str, int | None]:
    """:func:`pack`'s ``part_bytes``, ``max_files`` and ``max_bytes`` from :func:`add_pack_arguments`' options."""
    return {"part_bytes": int(args.part_mib * MIB), "max_files": args.max_files,
            "max_bytes": None if args.max_mib is None else int(args.max_mib * MIB)}


def resume_into(root: Path, sources: Sequence[Path]) -> tuple[dict[str, FileState], list[tuple[Path, dict]]]:
    """Before a run that packs what it writes: the store's state (:func:`store_state`, taken first, so what
    ``sources`` unpack is packed again and the newest pack holds it all) and ``sources``' manifests, after
    unpacking them into the store at ``root`` (printed). ``PackError`` when a pack does not verify."""
    root.mkdir(parents=True, exist_ok=True)
    before = store_state(root)
    previous = read_manifests(sources)
    if sources:
        print(f"unpacked {len(previous)} pack(s) into {root}: {action_summary(unpack(sources, root))}")
    return before, previous


def pack_written(root: Path, before: Mapping[str, FileState], args: argparse.Namespace, info: Mapping[str, Any],
                 keep_final_checkpoints: bool) -> int:
    """Pack every file of the store at ``root`` that changed since ``before`` (:func:`store_state`) into
    ``args.pack`` with :func:`add_pack_arguments`' limits and ``info`` in the manifest: 0, or 1 when the pack is
    over its limits. Then the complete entries and the rates are packed without the checkpoints, if that fits,
    and the error says so (a stopped chain then starts again from an earlier pack's checkpoint, or from step 0)."""
    files = changed_files(root, before, keep_final_checkpoints)
    if not files:
        print("nothing changed in the store: no pack written")
        return 0
    results = [f for f in files if PurePosixPath(f).name != CHECKPOINT_FILE]
    try:
        manifest = pack(root, files, args.pack, info, **pack_limits(args))
        left_out = 0
    except PackError as exc:
        if len(results) == len(files):
            print(f"error: {exc}", file=sys.stderr)
            return 1
        # over the pack's limits: the complete entries and the rates come first, the checkpoints are left out
        left_out = len(files) - len(results)
        print(f"error: {exc}\n{left_out} checkpoint(s) left out of the pack, the complete entries and the rates "
              "packed: the chains those checkpoints belong to lose the state they hold (a stopped chain starts "
              "again from an earlier pack's checkpoint, or from step 0)", file=sys.stderr)
        try:
            manifest = pack(root, results, args.pack, info, **pack_limits(args))
        except PackError as again:
            print(f"error: {again}", file=sys.stderr)
            return 1
    names = [manifest.name] + [p["name"] for p in json.loads(manifest.read_text())["parts"]]
    print(f"packed {len(files) - left_out} file(s) into {args.pack}: {', '.join(names)}")
    return 1 if left_out else 0

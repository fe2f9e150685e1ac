"""Files written whole or not at all, and their checksums: the kit's one way to write a file others may read.

A file of the results store, a checkpoint, a data file or a slice's manifest may be read by another process
(or cluster worker) while it is written, and a crash must never leave half of one in its place. Every
writer therefore writes a uniquely named temporary file in the target's folder and renames it over the
target (atomic on POSIX): :func:`atomic_path` for any writer (``torch.save``, a stream with a checksum to
verify first), :func:`atomic_write_bytes` for bytes in memory, :func:`new_file_path` for a file that must
not replace one (saved models). :func:`sha256_of` is the checksum the
store's data identities, the device bundle and the slices use.

Standard library only, so that ``device/install.py`` can load this file by its path on a machine where the
kit's dependencies are not installed yet.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

#: Bytes read at a time when hashing a file.
BLOCK = 1 << 20


def temporary_path(path: str | Path) -> Path:
    """A new, unique hidden name beside ``path`` (``.<name>.<random>.tmp``), for a file renamed over
    ``path`` once complete; such names are never entries, data or checkpoints of the kit."""
    path = Path(path)
    return path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")


@contextmanager
def _staged(path: str | Path, publish: Callable[[Path, Path], None]) -> Iterator[Path]:
    """A temporary path beside ``path`` (the folder is created); ``publish(tmp, path)`` when the block
    ends without an error; the temporary file is removed in any case."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(path)
    try:
        yield tmp
        publish(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_path(path: str | Path) -> contextlib.AbstractContextManager[Path]:
    """A temporary path beside ``path`` (:func:`temporary_path`; the folder is created) to write to; when
    the block ends without an error it is renamed over ``path``, otherwise removed, so readers see the old
    file or the new one, never a part of one::

        with atomic_path(target) as tmp:
            torch.save(state, tmp)
    """
    return _staged(path, os.replace)


def new_file_path(path: str | Path) -> contextlib.AbstractContextManager[Path]:
    """:func:`atomic_path` for a file that must not exist yet: the complete file is hard-linked to
    ``path``, which fails with ``FileExistsError`` when ``path`` exists, also when another writer made it
    in the meantime (a check before writing would let the later of two writers replace the earlier's)."""
    return _staged(path, os.link)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def sha256_of(path: str | Path) -> str:
    """The SHA-256 of a file's bytes (hex), read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


__all__ = ["atomic_path", "atomic_write_bytes", "new_file_path", "sha256_of", "temporary_path"]

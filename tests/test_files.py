"""gped_kit.files: whole files or none, and new files that never replace another writer's."""

from __future__ import annotations

import pytest

from gped_kit.files import atomic_path, new_file_path, sha256_of


def test_atomic_path_replaces_whole_and_leaves_nothing_on_error(tmp_path):
    target = tmp_path / "sub" / "a.bin"
    with atomic_path(target) as tmp:
        tmp.write_bytes(b"one")
    with atomic_path(target) as tmp:
        tmp.write_bytes(b"two")
    assert target.read_bytes() == b"two"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("the writer failed")
    assert target.read_bytes() == b"two" and sorted(p.name for p in target.parent.iterdir()) == ["a.bin"]
    assert sha256_of(target) == "3fc4ccfe745870e2c0d99f71f30ff0656c8dedd41cc1d7d3d376b0dbe685e2f3"


def test_new_file_path_refuses_an_existing_file_and_the_later_of_two_writers(tmp_path):
    target = tmp_path / "model.pt"
    first, second = new_file_path(target), new_file_path(target)
    a, b = first.__enter__(), second.__enter__()  # two writers staged at once
    a.write_bytes(b"first")
    b.write_bytes(b"second")
    first.__exit__(None, None, None)
    with pytest.raises(FileExistsError):
        second.__exit__(None, None, None)
    assert target.read_bytes() == b"first" and sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]

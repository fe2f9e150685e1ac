"""A table computed live again counts as the same table only up to round-off (`same_table`), so that
`make figures` on another host leaves the stored table alone, and a real change is still written."""

from __future__ import annotations

import pandas as pd

from gped_kit.plotting.save import save_table
from gped_kit.plotting.tables import TABLE_RTOL, same_table


def _table() -> pd.DataFrame:
    return pd.DataFrame({"model": ["fcnn", "cnn_mnist"], "nll": [0.52991, 0.000001], "seeds": [3, None],
                         "note": ["ok", None]})


def test_round_off_is_the_same_table_and_a_real_change_is_not(tmp_path):
    path = tmp_path / "t.csv"
    assert not same_table(_table(), path)  # no file yet
    _table().to_csv(path, index=False)
    assert same_table(_table(), path)
    off = _table().assign(nll=lambda t: t["nll"] * (1 + TABLE_RTOL / 10))  # another host's last digits
    assert same_table(off, path)
    assert not same_table(_table().assign(nll=lambda t: t["nll"] * (1 + TABLE_RTOL * 10)), path)
    assert not same_table(_table().assign(note=["ok", "changed"]), path)  # a missing cell filled
    assert not same_table(_table().assign(model=["fcnn", "cnn"]), path)  # text differs
    assert not same_table(_table().rename(columns={"nll": "NLL"}), path)  # another column
    assert not same_table(pd.concat([_table(), _table()]), path)  # more rows
    (tmp_path / "bad.csv").write_bytes(b"\xff\xfe\x00")
    assert not same_table(_table(), tmp_path / "bad.csv")


def test_save_table_keeps_files_that_hold_the_same_table_and_writes_a_changed_one(tmp_path):
    csv, md = save_table(_table(), "t", tmp_path)
    md.write_text(md.read_text() + "<!-- marker -->")  # a rewrite would drop it
    save_table(_table().assign(nll=lambda t: t["nll"] * (1 + TABLE_RTOL / 10)), "t", tmp_path)
    assert md.read_text().endswith("<!-- marker -->")
    doubled = _table().assign(nll=lambda t: t["nll"] * 2)
    save_table(doubled, "t", tmp_path)
    assert not md.read_text().endswith("<!-- marker -->") and same_table(doubled, csv)

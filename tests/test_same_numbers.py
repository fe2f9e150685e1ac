"""gped_kit.cli.same_numbers: two versions of the code, the same chains, compared bit for bit; or this checkout
against the committed store, within the tolerance two CPUs need for a long chain."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from gped_kit.cli.same_numbers import compare_entries, compare_tables, main
from gped_kit.experiments.numerics import LONG_CHAIN_TOLERANCE

REPO = Path(__file__).resolve().parents[1]
TINY = ["-p", "num_iterations=40", "-p", "burn_in=20", "-p", "log_every=20", "-p", "checkpoint_every=20",
        "-p", "eval_thinning=10"]


def _history(elapsed: float, nll: float) -> pd.DataFrame:
    return pd.DataFrame({"step": [20, 40], "student": ["a", "a"], "elapsed_s": [elapsed, 2 * elapsed],
                         "teacher_nll": [0.5, nll], "student_nll": [math.nan, 0.7]})


def test_timing_columns_aside_equal_tables_are_the_same_numbers() -> None:
    assert compare_tables(_history(1.0, 0.4), _history(3.5, 0.4)) is None  # elapsed differs, NaN == NaN


def test_one_bit_of_difference_is_found_and_named() -> None:
    nll = 0.4
    nudged = math.nextafter(nll, 1.0)
    message = compare_tables(_history(1.0, nll), _history(1.0, nudged))
    assert message is not None and "column 'teacher_nll', row 1" in message and repr(nudged) in message
    assert "rows" in compare_tables(_history(1.0, nll), _history(1.0, nll).iloc[:1])
    assert "columns differ" in compare_tables(_history(1.0, nll), _history(1.0, nll).drop(columns="student_nll"))
    # a number this checkout adds (a new metric) is no difference: stored results of the version lack it
    assert compare_tables(_history(1.0, nll), _history(1.0, nll).assign(student_ece=0.01)) is None


def test_entries_compare_table_by_table(tmp_path: Path) -> None:
    for side, nll in (("old", 0.4), ("new", 0.41)):
        (tmp_path / side).mkdir()
        _history(1.0, nll).to_csv(tmp_path / side / "history.csv", index=False)
        _history(1.0, 0.4).to_csv(tmp_path / side / "summary.csv", index=False)
    found = compare_entries(tmp_path / "old", tmp_path / "new")
    assert found["summary"] is None and "teacher_nll" in found["history"]


def test_a_tolerance_accepts_what_lies_within_it_and_names_what_does_not() -> None:
    tolerance = {"atol": 0.01, "rtol": 0.05}
    assert compare_tables(_history(1.0, 0.4), _history(1.0, 0.4 + 0.01 + 0.05 * 0.4 - 1e-6), tolerance) is None
    message = compare_tables(_history(1.0, 0.4), _history(1.0, 0.45), tolerance)
    assert "column 'teacher_nll', row 1" in message and "beyond atol 0.01 + rtol 0.05" in message
    words = _history(1.0, 0.4).assign(student=["a", "b"])
    assert "column 'student'" in compare_tables(_history(1.0, 0.4), words, tolerance)  # text stays exact


@pytest.mark.parametrize("argv, message", [
    (["--old", "HEAD", "--chains", "3"], "--chains [3]: 00_quickstart has 1 chains"),
    (["--old", "HEAD", "--notebook", "04_figure3_masking"], "it runs no chain of the store"),
    (["--old", "HEAD", "-p", "num_iterations=-5"], "num_iterations"),
    (["--old", "no-such-revision-xyz"], "is not a revision"),
    (["--chains", "0"], "--old is required"),
    (["--old", "HEAD", "--stored"], "give --old or --stored, not both"),
    (["--stored", "no-such-folder"], "no chain entries there"),
])
def test_bad_input_is_refused_before_anything_runs(argv: list[str], message: str,
                                                   capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_head_against_this_checkout_gives_the_same_numbers(capsys: pytest.CaptureFixture) -> None:
    """Notebook 00's chain, cut to 40 steps, under HEAD (a temporary worktree) and this checkout: identical
    unless this checkout changes the numerics; the worktree is removed afterwards."""
    changed = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "gped_kit"], cwd=REPO).returncode
    if changed:
        pytest.skip("this checkout changes gped_kit against HEAD: the numbers may differ on purpose")
    assert main(["--old", "HEAD", *TINY]) == 0
    printed = capsys.readouterr().out
    assert "chain 0 history: identical" in printed and "chain 0 summary: identical" in printed
    assert "same numbers" in printed
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=REPO, capture_output=True, text=True).stdout
    assert "gped-same-numbers-" not in worktrees


@pytest.mark.slow
def test_committed_chains_are_reproduced_within_the_long_chain_tolerance(capsys: pytest.CaptureFixture) -> None:
    """A sample of the committed store, recomputed by this checkout: two of notebook 10's 3,000-step chains
    (SGLD and BAOA, about a minute each), their final numbers within the tolerance two CPUs need."""
    assert main(["--stored", str(REPO / "results"), "--notebook", "10_samplers", "--chains", "0,4"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("summary: within tolerance") == 2
    assert f"within atol {LONG_CHAIN_TOLERANCE['atol']:g}" in printed

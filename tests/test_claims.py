"""Claims cell by cell (gped_kit.experiments.claims): who wins a cell, the comparison label, the count and
seed texts, and the Experiment 2 trend comparisons on hand-built tables with known answers."""

import math

import pandas as pd
import pytest

from gped_kit.experiments import claims
from gped_kit.experiments.experiment2 import experiment2_trends
from gped_kit.experiments.experiment2.notebook import readme_rows


def test_winner_knows_which_direction_is_better_and_reports_ties_and_gaps():
    assert claims.winner(0.3, 0.4, lower_is_better=True) == "GPED"
    assert claims.winner(0.3, 0.4, lower_is_better=False) == "EnD2"
    assert claims.winner(0.5, 0.5, lower_is_better=True) == "tie"
    assert claims.winner(float("nan"), 0.4, True) is None and claims.winner(0.3, None, True) is None


def test_compare_labels_each_cell_and_never_counts_a_missing_side_as_agreement():
    assert claims.compare("GPED", "GPED") == claims.AGREE
    assert claims.compare("EnD2", "GPED") == claims.DISAGREE
    assert claims.compare("tie", "GPED") == claims.DISAGREE  # a tie of ours is not a win
    assert claims.compare("GPED", "tie") == claims.PAPER_TIE
    assert claims.compare("GPED", None) == claims.OURS_ONLY and claims.compare("GPED", float("nan")) == claims.OURS_ONLY
    assert claims.compare(None, "EnD2") == claims.PAPER_ONLY
    cells = pd.DataFrame({"comparison": [claims.AGREE, claims.DISAGREE, claims.AGREE, claims.OURS_ONLY,
                                         claims.PAPER_ONLY, claims.PAPER_TIE]})
    assert claims.agreement_text(cells) == "agree in 2 of 3 cells compared"
    assert claims.agreement_text(cells.iloc[3:]) == "no cell in common"
    left_out = pd.concat([cells, pd.DataFrame({"comparison": [claims.NOT_SEPARABLE, claims.NO_EVIDENCE,
                                                              claims.NOT_SEPARABLE]})])
    assert claims.agreement_text(left_out) == "agree in 2 of 3 cells compared; 2 not separable; 1 no evidence"
    assert claims.agreement_text(left_out.iloc[-1:]) == "agree in 0 of 0 cells compared; 1 not separable"
    # the counts behind the words, stored beside them: the README's rows sum these and never read the words
    assert claims.agreement(left_out) == {"agree": "agree in 2 of 3 cells compared; 2 not separable; 1 no evidence",
                                          "cells_agree": 2, "cells_compared": 3, "cells_not_separable": 2,
                                          "cells_no_evidence": 1}
    assert claims.agreement(cells.iloc[3:])["cells_compared"] == 0


def test_count_and_seed_texts():
    assert claims.count_text(6, 8) == "6 of 8"
    assert claims.seed_counts_text({0: 6}, 8) == "6 of 8 (one seed)"
    assert claims.seed_counts_text({0: 6, 1: 6, 2: 6}, 8) == "6 of 8 in 3 of 3 seeds"
    assert claims.seed_counts_text({0: 6, 1: 5, 2: 6}, 8) == "5-6 of 8 over 3 seeds (seed 0: 6, seed 1: 5, seed 2: 6)"
    per_seed = pd.DataFrame({"cell": ["a", "a", "a", "b", "b", "c"], "seed": [2, 0, 1, 0, 1, 0],
                             "ours": ["EnD2", "GPED", "GPED", "GPED", "GPED", None]})
    spread = claims.seed_spread(per_seed, ["cell"]).set_index("cell")
    assert spread.loc["a", "ours_by_seed"] == "GPED, GPED, EnD2" and not spread.loc["a", "seed_stable"]
    assert spread.loc["b", "seeds"] == 2 and spread.loc["b", "seed_stable"]
    assert "c" not in spread.index  # no outcome in any seed


def test_check_seeds_names_the_setting():
    claims.check_seeds("seeds", claims.THREE_SEEDS)
    for bad in ((), (0, 0), (-1,), (0.5,), [0, 1], (True,)):
        with pytest.raises(ValueError, match=r"seeds(\[\d\])?="):
            claims.check_seeds("seeds", bad)


def _cells(gap_peak_at: int = 15, uo_better: bool = True) -> pd.DataFrame:
    rows = []
    for n, base in ((10_000, 0.2), (60_000, 0.1)):
        for m, rate in ((0, 0.0), (15, 0.287), (25, 0.797)):
            for est, extra in (("U_o", 0.0), ("U_s", 0.01 if uo_better else -0.01)):
                gap = (0.3 if m == gap_peak_at else 0.1) * base * 10 + extra
                rows.append(dict(model="fcnn", labelled_size=n, mask_size=m, masking_rate=rate, estimator=est,
                                 teacher_nll=base + 2 * rate, nll_gap=gap, entropy_mae=gap / 3 + extra))
    return pd.DataFrame(rows)


def test_trend_cells_list_every_comparison_with_its_outcome():
    cells = claims.trend_cells(_cells())
    assert list(cells.columns) == list(claims.TREND_CELL_COLUMNS)
    sizes = cells.groupby("trend", sort=False).size().to_dict()
    assert sizes == {"teacher NLL falls with more labelled data": 3, "teacher NLL rises with masking": 2,
                     "NLL gap falls with more labelled data": 6, "NLL gap peaks at moderate masking": 4,
                     "entropy MAE peaks at moderate masking": 4, "U_o at least as good as U_s": 12}
    assert cells["holds"].all()
    assert cells.loc[0, "setting"] == "m=0, N 10000 -> 60000" and cells.loc[0, "mask_size"] == 0
    bad = claims.trend_cells(_cells(gap_peak_at=25, uo_better=False))
    peaks = bad[bad["trend"] == "NLL gap peaks at moderate masking"]
    assert not peaks["holds"].any() and set(peaks["setting"]) == {
        f"{e}, N={n}, m 0 -> 15 -> 25" for e in ("U_o", "U_s") for n in (10_000, 60_000)}
    assert not bad.loc[bad["trend"] == "U_o at least as good as U_s", "holds"].any()
    # a missing value does not hold and is no evidence (never counted against the trend); one mask or one size
    # gives no such comparison
    gap = _cells()
    gap.loc[(gap["labelled_size"] == 60_000) & (gap["mask_size"] == 0) & (gap["estimator"] == "U_o"), "nll_gap"] = \
        math.nan
    falls = claims.trend_cells(gap)
    falls = falls[falls["trend"] == "NLL gap falls with more labelled data"].set_index("setting")
    assert not falls.loc["U_o, m=0, N 10000 -> 60000", "holds"] and falls["holds"].sum() == 5
    assert falls["no_evidence"].tolist() == [s == "U_o, m=0, N 10000 -> 60000" for s in falls.index]
    trends = experiment2_trends(gap).set_index("trend")
    assert trends.loc["NLL gap falls with more labelled data", "count"] == "5 of 5 (1 no evidence)"
    assert trends.loc["NLL gap falls with more labelled data", "holds"]
    one = claims.trend_cells(_cells()[lambda d: d["labelled_size"] == 10_000])
    assert "teacher NLL falls with more labelled data" not in set(one["trend"])
    assert claims.trend_cells(pd.DataFrame(columns=["model"])).empty


def _trends(path, profile: str, agree: tuple[int, ...], seeds: str) -> None:
    counts = dict(zip(claims.AGREEMENT_COUNTS, agree + (0,) * (4 - len(agree))))
    pd.DataFrame([{"model": "fcnn", "trend": "teacher NLL falls with more labelled data", "ours": "2 of 2",
                   "paper": "2 of 2", "agree": claims.agreement_words(**counts), **counts, "seeds": seeds,
                   "unstable_cells": 1, "holds": True,
                   "paper_statement": "yes, for every masking rate"}]).to_csv(
        path / f"experiment2_mnist_trends_{profile}.csv", index=False)


def test_exp2_rows_judge_on_three_seeds_where_stored_and_name_what_they_leave_out(tmp_path, tables_recorded):
    _trends(tmp_path, "default", (2, 3), "2 of 3 (one seed)")
    (row,) = readme_rows(tmp_path)
    assert row.verdict == "partly (agree in 2 of 3 cells)" and str(row.evidence) == "default, T = 5,000, one seed"
    # three seeds stored: their outcomes, with the one the seeds cannot tell apart named and not compared
    _trends(tmp_path, "seeds", (2, 2, 1, 1),
            "2 of 2 in 3 of 3 seeds")
    (row,) = readme_rows(tmp_path)
    assert row.verdict == "yes (agree in 2 of 2 cells; 1 not separable; 1 no evidence)"
    assert str(row.evidence) == "default, T = 5,000, 3 seeds" and "per seed: FCNN 2 of 2 in 3 of 3 seeds" in row.ours
    assert "experiment2_mnist_trends_seeds.md" in row.where

"""The README: its claims table is the one the committed figures' tables give, its rules judge
hand-built tables correctly, its local links resolve, and it stays a landing page."""

import re
from pathlib import Path

import pandas as pd
import pytest

from gped_kit.cli import readme as R
from gped_kit.experiments import verdicts as V
from gped_kit.experiments.comparison import notebook as CN
from gped_kit.experiments.experiment1 import notebook as E1N
from gped_kit.experiments.experiment2 import notebook as E2N
from gped_kit.experiments.experiment4 import notebook as E4N
from gped_kit.experiments.samplers import notebook as SN
from gped_kit.experiments.thesis import notebook as TN
from gped_kit.experiments.thesis.toys import LOGREG_MEMORY_CLAIM, MOG_MEMORY_CLAIM
from gped_kit.experiments.verdicts import counts

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_the_readme_claims_table_is_what_the_committed_tables_give():
    text = README.read_text()
    assert R.replace_block(text, R.render(R.claims_table(ROOT / "figures"))) == text, \
        "README.md's claims table is stale: run `python -m gped_kit.cli.readme` and commit README.md"
    assert R.main(["--readme", str(README), "--figures", str(ROOT / "figures"), "--check"]) == 0


def test_the_check_fails_on_a_stale_table(tmp_path):
    stale = tmp_path / "README.md"
    stale.write_text(README.read_text().replace("| Table 1: a student", "| Table 1 (edited by hand): a student", 1))
    assert R.main(["--readme", str(stale), "--figures", str(ROOT / "figures"), "--check"]) == 1
    assert R.main(["--readme", str(stale), "--figures", str(ROOT / "figures")]) == 0
    assert stale.read_text() == README.read_text()


def test_a_readme_without_the_markers_is_refused_with_the_lines_to_add():
    with pytest.raises(ValueError, match="has no claims block"):
        R.replace_block("# a README\n", "block")


def _table1(tmp_path, profile, rows):
    cols = ["model", "teacher_nll", "teacher_nll_std", "teacher_nll_paper", "student_nll", "student_nll_std",
            "student_nll_paper", "entropy_mae", "entropy_mae_std", "entropy_mae_paper", "seeds"]
    pd.DataFrame(rows, columns=cols).to_csv(tmp_path / f"table1_experiment1_{profile}.csv", index=False)


def test_table1_rules_on_hand_built_tables(tmp_path):
    _table1(tmp_path, "default", [["fcnn", 0.10, 0.0, 0.052, 0.13, 0.0, 0.082, 0.05, 0.0, 0.016, 3],
                                  ["cnn_mnist", 0.04, 0.0, 0.022, 0.10, 0.0, 0.053, 0.03, 0.0, 0.016, 3]])
    gap = E1N.table1_gap(tmp_path)
    # FCNN gap 0.03 <= 2 x 0.030; CNN gap 0.06 < 2 x 0.031 = 0.062: both hold
    assert gap.verdict == "yes" and "FCNN +0.030" in gap.ours and "CNN +0.060" in gap.ours and "3 seeds" in gap.ours
    _table1(tmp_path, "cpu30", [["fcnn", 0.057, None, 0.052, 0.08, None, 0.082, 0.02, None, 0.016, 1],
                                ["cnn_mnist", 0.03, None, 0.022, 0.05, None, 0.053, 0.017, None, 0.016, 1]])
    values = E1N.table1_values(tmp_path, "cpu30", "cpu30")
    # within 10%: FCNN teacher (0.057 <= 0.0572), both students, CNN entropy (0.017 <= 0.0176); not the rest
    assert values.verdict == "partly (4 of 6 within 10%)" and "1 seed)" in values.ours and "±" not in values.ours
    assert E1N.table1_values(tmp_path, "long", "long") is None  # no table, no row
    # two-sided: a student 15% below the paper's is not within 10%; it is better than the paper's, said apart
    _table1(tmp_path, "cpu30", [["fcnn", 0.057, None, 0.052, 0.07, None, 0.082, 0.02, None, 0.016, 1],
                                ["cnn_mnist", 0.03, None, 0.022, 0.05, None, 0.053, 0.017, None, 0.016, 1]])
    values = E1N.table1_values(tmp_path, "cpu30", "cpu30")
    assert values.verdict == ("partly (3 of 6 within 10%; 1 better than the paper's: FCNN student; its students "
                              "are updated every 2 / 2 steps, the paper's every 100 / 10)")
    _table1(tmp_path, "cpu30", [["fcnn", 0.057, None, 0.052, 0.08, None, 0.082, 0.02, None, 0.016, 3],
                                ["cnn_mnist", 0.03, None, 0.022, 0.05, None, 0.053, 0.017, None, 0.016, 2]])
    assert E1N.table1_values(tmp_path, "cpu30", "cpu30").ours.endswith("(seeds: FCNN 3, CNN 2)")  # a failed seed
    # the measured time of one seed, both models, from notebook 01's per-profile table (all seeds' seconds)
    pd.DataFrame({"profile": ["cpu30", "cpu30", "default"], "model": ["fcnn", "cnn_mnist", "fcnn"],
                  "seeds": [3, 2, 3], "seconds": [1800.0, 2400.0, 60.0]}).to_csv(
        tmp_path / "table1_experiment1_profiles.csv", index=False)
    assert E1N.table1_minutes_per_seed(tmp_path, "cpu30", ["fcnn", "cnn_mnist"]) == pytest.approx(30.0)  # 10 + 20
    assert E1N.table1_values(tmp_path, "cpu30", "cpu30").ours.endswith(
        "(seeds: FCNN 3, CNN 2; 30.0 min a seed for FCNN and CNN)")
    assert E1N.table1_minutes_per_seed(tmp_path, "default", ["fcnn", "cnn_mnist"]) is None  # CNN's time missing


def test_the_paper_profile_row_reads_the_newest_lease_of_the_gpu_per_model(tmp_path):
    figures = tmp_path / "figures"
    figures.mkdir()
    assert R.paper_profile_on_gpu(figures).verdict == "not run"
    rows = [(step, student, teacher, nll, mae)
            for step, teacher in ((10_000, 0.09), (20_000, 0.08))
            for student, nll, mae in (("predictive-U_s-K1x1", teacher + 0.02, None),
                                      ("predictive-U_o-K1x1", teacher + 0.01, None),
                                      ("entropy-U_s-K1x1", None, 0.03), ("entropy-U_o-K1x1", None, 0.02))]
    history = pd.DataFrame(rows, columns=["step", "student", "teacher_nll", "student_nll", "entropy_mae"])
    for lease in ("2026-01-01-old", "2026-02-01-new"):
        folder = tmp_path / R.DEVICE_RUNS / lease
        folder.mkdir(parents=True)
        history.assign(teacher_nll=lambda d: d["teacher_nll"] - (lease == "2026-02-01-new") * 0.01).to_csv(
            folder / R.DEVICE_HISTORY.format(model="fcnn"), index=False)
    row = R.paper_profile_on_gpu(figures)
    assert row.verdict == "partly run"
    assert "FCNN chain to T = 20,000 of 10^6 (2026-02-01-new)" in row.ours and "teacher 0.0700" in row.ours
    assert "U_o / U_s 0.0900 / 0.1000" in row.ours and "entropy MAE U_o / U_s 0.0200 / 0.0300" in row.ours
    assert "CNN-MNIST and the other notebooks not run" in row.ours
    assert "teacher 0.052" in row.paper and "0.054 / 0.082" in row.paper  # Table 6, N = 60,000, r = 0
    assert "docs/device-runs/2026-02-01-new/README.md" in row.where
    # a CNN chain from the older lease only: both rows, each from its own newest lease
    history[history["step"] == 10_000].to_csv(
        tmp_path / R.DEVICE_RUNS / "2026-01-01-old" / R.DEVICE_HISTORY.format(model="cnn_mnist"), index=False)
    row = R.paper_profile_on_gpu(figures)
    assert "CNN-MNIST chain to T = 10,000 of 10^6 (2026-01-01-old): teacher 0.0900" in row.ours
    assert "not run" not in row.ours.replace("the other notebooks not run", "")
    assert "CNN-MNIST, T = 10^6 (Table 5, N = 60,000, r = 0): teacher 0.022" in row.paper
    assert "2026-01-01-old/README.md" in row.where and "2026-02-01-new/README.md" in row.where


def test_trend_rows_count_agreeing_cells(tmp_path):
    pd.DataFrame({"model": ["fcnn", "cnn_mnist"], "trend": ["U_o at least as good as U_s"] * 2,
                  "ours": ["12 of 12", "9 of 12"], "paper": ["11 of 12", "12 of 12"],
                  "agree": ["agree in 11 of 12 cells compared", "agree in 9 of 12 cells compared"],
                  "paper_statement": ["almost always"] * 2}).to_csv(tmp_path / "experiment2_mnist_trends_default.csv",
                                                                     index=False)
    (row,) = E2N.readme_rows(tmp_path)
    assert row.verdict == "partly (agree in 20 of 24 cells)" and row.ours == "FCNN 12 of 12, CNN 9 of 12"


def test_the_comparison_order_rule(tmp_path):
    def verdict(nlls):
        pd.DataFrame({"eval_set": "test", "method": list(nlls), "nll": list(nlls.values())}).to_csv(
            tmp_path / "comparison_mnist_default.csv", index=False)
        return CN.order_row(tmp_path)[0].verdict
    assert verdict({"Snapshot ensemble": 0.10, "Hydra": 0.11, "KD": 0.12, "EnD2": 0.13}) == "yes"
    assert verdict({"Snapshot ensemble": 0.12, "Hydra": 0.11, "KD": 0.12, "EnD2": 0.13}) == "partly"
    assert verdict({"Snapshot ensemble": 0.14, "Hydra": 0.13, "KD": 0.12, "EnD2": 0.11}) == "no"


def test_the_long_profile_column_judges_its_own_tables_by_the_same_rule(tmp_path):
    def write(profile, nlls):
        pd.DataFrame({"eval_set": "test", "method": list(nlls), "nll": list(nlls.values())}).to_csv(
            tmp_path / f"comparison_mnist_{profile}.csv", index=False)

    write("default", {"Snapshot ensemble": 0.14, "Hydra": 0.13, "KD": 0.12, "EnD2": 0.11})
    row = next(r for r in R.claims_table(tmp_path) if r.claim.startswith("Hydra paper"))
    assert row.verdict == "no" and row.long == "—"  # no long table: no long verdict
    write("long", {"Snapshot ensemble": 0.05, "Hydra": 0.06, "KD": 0.07, "EnD2": 0.08})
    row = next(r for r in R.claims_table(tmp_path) if r.claim.startswith("Hydra paper"))
    assert row.verdict == "no" and row.long.startswith("yes: ") and "Hydra 0.060" in row.long
    assert "| no; `long`: yes |" in R.render([row])  # the README's short table: both verdicts
    assert "ours, `long` profile" in R.render_details([row]) and "| yes: " in R.render_details([row])


def test_counts_are_read_from_count_texts():
    assert counts("agree in 9 of 12 cells compared", "agree in ") == (9, 12)
    assert counts("6 of 8") == (6, 8)


def test_the_readme_lands():
    text = README.read_text()
    assert len(text.splitlines()) <= 150, "the README is a landing page; details go to docs/"
    assert "arxiv.org/abs/2005.08110" in text and "Vadera" in text  # which paper it reproduces
    for command in ("make figures", "make test", "make test-slow"):
        assert f"\n{command}" in text or f"`{command}`" in text
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    for target in re.findall(r"\]\(((?!https?://)[^)#]+)", text):  # every local link resolves
        assert (ROOT / target).exists(), target


def test_the_teachers_row_counts_models_within_ten_percent_per_profile(tmp_path):
    pd.DataFrame({"model": ["fcnn", "fcnn", "cnn_mnist", "cnn_mnist"], "metric": ["nll", "accuracy"] * 2,
                  "teacher (default)": [0.49, 0.83, 0.39, 0.87], "teacher (long)": [0.38, 0.87, 0.31, 0.90],
                  "paper": [0.362, None, 0.269, None],
                  "teacher / paper (default)": [0.49 / 0.362, None, 0.39 / 0.269, None],
                  "teacher / paper (long)": [0.38 / 0.362, None, 0.31 / 0.269, None]}).to_csv(
        tmp_path / "experiment4_teacher_quality_profiles.csv", index=False)
    (default,) = E4N.teacher_row(tmp_path)
    assert default.verdict == "no" and default.ours.startswith("FCNN 0.4900 (1.35× the paper's)")
    (long,) = E4N.teacher_row(tmp_path, "long")
    assert long.verdict.startswith("partly") and "CNN 0.3100 (1.15× the paper's)" in long.ours  # 1.15 > 1.1
    assert long.paper == "FCNN 0.362, CNN 0.269 (T = 10^6)"
    assert E4N.teacher_row(tmp_path, "cpu30") == []  # no column for that profile
    assert R._long_cell(long) == f"{long.verdict}: {long.ours}"


def test_the_samplers_rows_read_notebook_10s_default_and_pooling_tables(tmp_path):
    assert SN.study_row(tmp_path) is None and SN.study_row(tmp_path, "pooling") is None
    table = pd.DataFrame({"candidate": ["BAOA, one chain", "BAOA, 4 chains pooled"], "seeds": [2, 2],
                          "T": [48_000, 48_000], "teacher NLL": [0.0645, 0.0624], "student NLL": [0.0713, 0.0942],
                          "entropy MAE": [0.0202, 0.0479]})
    table.to_csv(tmp_path / "10_samplers_pooling_table.csv", index=False)
    row = SN.study_row(tmp_path, "pooling")
    assert "48,000 teacher steps in all, 2 seeds" in row.claim
    assert row.ours == "BAOA, 4 chains pooled 0.0624 / 0.0942 / 0.0479; BAOA, one chain 0.0645 / 0.0713 / 0.0202"
    assert row.paper == "Table 1, FCNN, SGLD at T = 10^6: 0.052 / 0.082 / 0.016"
    table.assign(seeds=1).to_csv(tmp_path / "10_samplers_default_table.csv", index=False)
    assert SN.study_row(tmp_path).claim == "(ours) the teacher's sampler at equal work (FCNN, T = 48,000, 1 seed)"


def test_within_10_percent_is_two_sided_and_better_is_its_own_verdict():
    assert V.within(1.10, 1.0) and V.within(0.90, 1.0) and V.within(0.052, 0.052)
    assert not V.within(1.11, 1.0) and not V.within(0.89, 1.0)  # 11% either way fails
    assert not V.within(float("nan"), 1.0) and not V.within(1.0, 0.0)
    assert [V.compare(x, 1.0) for x in (0.95, 1.05, 0.8, 1.2)] == ["within", "within", "better", "worse"]
    assert V.compare(float("nan"), 1.0) == "missing"


def test_thesis_claims_that_hold_by_construction_are_reported_not_counted(tmp_path):
    rows = [("MoG: online EM as close to p_MC as batch EM", True, "mean_kl_test", "x"),
            (MOG_MEMORY_CLAIM, True, "mean_kl_test", "online / batch bytes: 0.02 at most"),
            (LOGREG_MEMORY_CLAIM, True, "mean_kl_test", "online / batch bytes: 0.006 at most"),
            (LOGREG_MEMORY_CLAIM, True, "mean_kl_grid", "online / batch bytes: 0.006 at most"),
            ("Derivative square error closer to p_MC than cross-entropy", False, "mean_kl_test", "y")]
    pd.DataFrame([dict(claim=c, holds=h, metric=m, ours=o, thesis="t", count=int(h), of=1) for c, h, m, o in rows]
                 ).to_csv(tmp_path / f"{TN.CLAIMS_TABLE.format(profile='default')}.csv", index=False)
    (row,) = TN.readme_rows(tmp_path)
    assert row.verdict == "partly" and row.ours.startswith("1 of 2 claims hold; not: Derivative square error")
    assert row.ours.count(LOGREG_MEMORY_CLAIM) == 1 and "not counted, as they hold by construction" in row.ours


def test_short_verdicts_keep_the_counts_and_drop_the_reasons():
    assert V.short_verdict("yes") == "yes"
    assert V.short_verdict("partly (agree in 5 of 6 cells)") == "partly (agree in 5 of 6 cells)"
    assert V.short_verdict("no (0 of 6 within 10%; 2 better than the paper's: FCNN student, CNN student; its "
                           "students are updated every 2 / 2 steps, the paper's every 100 / 10)") == \
        "no (0 of 6 within 10%; 2 better than the paper's)"


def test_the_verdict_counts_the_judged_rows_and_names_the_paper_length_cells(tmp_path):
    rows = [V.Claim("a", "yes", "1", "1", "w"), V.Claim("b", "partly (agree in 1 of 2 cells)", "1", "1", "w"),
            V.Claim("c", "no", "1", "1", "w"), V.Claim("(ours) d", "—", "1", "1", "w"),
            V.Claim("e", "not comparable (no OOD set in common; on ours GPED leads in 9 of 16 cells)", "9 of 16",
                    "x", "w"), V.Claim("f", "not run", "—", "x", "w")]
    figures = tmp_path / "figures"
    figures.mkdir()
    text = R.render_verdict(rows, figures)
    assert "(3), **1 hold, 1 hold partly and 1 do not** on a CPU; 1 cannot be compared and 1 are not run" in text
    assert "At the paper's length" not in text  # no GPU history: no sentence
    run = tmp_path / R.DEVICE_RUNS / "2026-01-01-gpu"
    run.mkdir(parents=True)
    step = 1_000_000
    pd.DataFrame({"step": [step] * 4, "teacher_nll": [0.0539] * 4,
                  "student": ["predictive-U_s-K1x1", "predictive-U_o-K1x1", "entropy-U_s-K1x1", "entropy-U_o-K1x1"],
                  "student_nll": [0.0636, 0.0630, None, None], "entropy_mae": [None, None, 0.0222, 0.0157]}
                 ).to_csv(run / R.DEVICE_HISTORY.format(model="fcnn"), index=False)
    text = R.render_verdict(rows, figures)
    # the paper's Table 6 (N = 60,000, r = 0): 0.052; 0.054 / 0.082; 0.016 / 0.020 -> within: teacher, entropy U_o
    assert ("FCNN: teacher NLL 0.0539 (0.052), student NLL U_o 0.0630 (0.054), U_s 0.0636 (0.082), entropy MAE "
            "U_o 0.0157 (0.016), U_s 0.0222 (0.02); 2 of 5 within 10% (2026-01-01-gpu)") in text


def test_ood_rows_count_students_above_their_own_teachers_auroc(tmp_path):
    pd.DataFrame({"metric": ["auroc", "auroc", "auroc", "nll"], "ood_inputs": ["whole", "whole", "masked", None],
                  "minus_teacher": [0.1, -0.2, 0.05, 0.3]}).to_csv(
        tmp_path / f"{E4N.TEACHER_LINES.format(profile='default')}.csv", index=False)
    assert E4N.students_above_teacher(tmp_path, "default", "whole") == (1, 2)
    assert E4N.students_above_teacher(tmp_path, "default", "masked") == (1, 1)
    assert E4N.students_above_teacher(tmp_path, "long", "whole") is None


def test_the_model_uncertainty_row_names_students_no_better_than_predicting_zero(tmp_path):
    pd.DataFrame({"eval_set": ["test"] * 4 + ["mnist_rotated60"],
                  "method": ["GPED", "EnD2", "Hydra", "Zero MU (baseline)", "GPED"],
                  "mu_mae_teacher": [0.08, 0.03, 0.039, 0.039, 0.5]}).to_csv(
        tmp_path / f"{CN.MU_SPLIT_TABLE.format(profile='default')}.csv", index=False)
    (row,) = CN.mu_row(tmp_path)
    assert row.verdict == "— (GPED, Hydra no better than predicting zero)"  # a tie is no better
    assert row.ours == "GPED 0.080, EnD2 0.030, Hydra 0.039, predicting zero 0.039"
    assert CN.mu_row(tmp_path, "long") == []

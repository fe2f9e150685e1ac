"""The notebooks' reading sentences (each experiment's ``reading`` module) written from hand-built tables: every
number they state is the table's, and they say where GPED loses, whether the seeds separate a winner, and which methods
do worse than predicting no model uncertainty."""

import pandas as pd

from gped_kit.experiments import comparison as C
from gped_kit.experiments import experiment4, samplers

SETTINGS = [(e, s) for s in ("base", "largest_width_multiplier") for e in ("U_s", "U_o")]


def _downstream() -> pd.DataFrame:
    rows = []
    for model in ("fcnn", "cnn_mnist"):
        chain = dict(model=model, seed=0, run_key=model)
        for est, size in SETTINGS:
            who = dict(chain, estimator=est, student=size, skill=0.5)  # students that beat the constant
            loses = (model, size) == ("cnn_mnist", "largest_width_multiplier")
            rows += [dict(who, method="GPED", metric="nll", value=0.503 if loses else 0.3),
                     dict(who, method="EnD2", metric="nll", value=0.491),
                     dict(who, method="EnD2 (tau = 2.5)", metric="nll", value=1.2 if est == "U_s" else 1.4)]
            for kind in ("total", "knowledge"):
                rows += [dict(who, method="GPED", metric="auroc", value=0.7, uncertainty=kind,
                              ood_dataset="fashion_mnist", ood_masked=False),
                         dict(who, method="EnD2", metric="auroc", value=0.95, uncertainty=kind,
                              ood_dataset="fashion_mnist", ood_masked=False)]
        rows.append(dict(chain, method="Ensemble", metric="nll", value=0.25))
        rows += [dict(chain, method="Ensemble", metric="auroc", value=0.8, uncertainty=kind,
                      ood_dataset="fashion_mnist", ood_masked=False) for kind in ("total", "knowledge")]
    return pd.DataFrame(rows)


def test_experiment4_reading_states_the_tables_numbers_and_where_gped_loses():
    text = experiment4.experiment4_reading(_downstream(), "default")
    assert text.startswith("**Reading Experiment 4** ('default' profile")
    assert ("- GPED lower NLL than EnD²: ours 6 of 8 cells; the paper 8 of 8 (MNIST) in its own cells, "
            "agree in 6 of 8 cells compared; over seeds 6 of 8 (one seed); against EnD² (τ = 2.5): 8 of 8.") in text
    assert "GPED loses in distribution in 2 cell(s): NLL in CNN-MNIST U_o largest (0.503 against EnD²'s 0.491; " \
           "the paper: 0.305 against 0.314) and NLL in CNN-MNIST U_s largest (0.503 against EnD²'s 0.491; " \
           "the paper: 0.296 against 0.321)." in text
    assert "against EnD² (τ = 2.5): nan" not in text and ": 8 of 8." in text
    assert "ours 0 of 16 cells; the paper 20 of 32 (MNIST)" in text and "no cell in common" in text
    assert "FCNN total: ours 0 of 4 (Fashion-MNIST (whole)), the paper 8 of 8 (KMNIST, notMNIST)" in text
    # the ensemble's own AUROC (0.8) is above GPED's (0.7) everywhere and below EnD2's (0.95) everywhere
    assert ("The teacher ensemble's own OOD AUROC (FCNN total 0.800; FCNN knowledge 0.800; CNN-MNIST total 0.800; "
            "CNN-MNIST knowledge 0.800) is higher than GPED's in 16 of 16 cells (student minus teacher -0.100) and "
            "EnD²'s in 0 of 16 cells (student minus teacher +0.150).") in text
    assert "test NLL 0.491 at τ = 1, 1.200–1.400 at τ = 2.5" in text
    assert experiment4.experiment4_reading(pd.DataFrame()).endswith("nothing to read.")


def _comparison_table() -> pd.DataFrame:
    rows = []
    for eval_set, teacher_mu in (("test", 0.039), ("fashion_mnist", 0.19)):
        common = dict(model="fcnn", eval_set=eval_set, num_iterations=4000, num_snapshots=20)
        rows += [dict(common, method=C.TEACHER, mu_mae_teacher=0.0, total_bias_teacher=0.0, data_bias_teacher=0.0,
                      mu_bias_teacher=0.0, total_mean=0.163, data_mean=0.124, mu_mean=teacher_mu),
                 dict(common, method=C.SNAPSHOTS, mu_mae_teacher=0.009, total_mean=0.16, data_mean=0.12,
                      mu_mean=0.038),
                 dict(common, method="GPED", mu_mae_teacher=0.078, total_bias_teacher=-0.010,
                      data_bias_teacher=-0.067, mu_bias_teacher=0.057, total_mean=0.153, data_mean=0.057,
                      mu_mean=0.096, skill=0.03, mu_skill=-0.9, params=478811, train_steps=1499, train_batch_size=100,
                      inputs_seen=149900,
                      targets="current sample"),
                 dict(common, method="Hydra", mu_mae_teacher=0.018, total_bias_teacher=0.0, data_bias_teacher=0.0,
                      mu_bias_teacher=-0.014, total_mean=0.163, data_mean=0.12, mu_mean=0.025, skill=0.97,
                      mu_skill=0.4, params=1498600,
                      train_steps=3000, train_batch_size=100, inputs_seen=300000, targets="cached logits"),
                 dict(common, method=C.ZERO_MU, mu_mae_teacher=teacher_mu, mu_mean=0.0)]
    return pd.DataFrame(rows)


def test_comparison_reading_sets_each_method_beside_the_zero_mu_baseline():
    text = C.comparison_reading(_comparison_table())
    assert "Every one beats the best constant" not in text
    stored_before = C.comparison_reading(_comparison_table().drop(columns=["skill", "mu_skill"]))
    assert "No evidence (skill over the best constant below 0.05 or not stored): GPED and Hydra." in stored_before
    assert "long-chain teacher, T = 4,000" in text and "snapshot ensemble, S = 20" in text
    assert ("*test*: mean |ΔMU| against the teacher: GPED 0.078, Hydra 0.018; predicting zero MU: 0.039. "
            "Worse than predicting zero: none. Closest: Hydra. No evidence (skill over the best constant below 0.05 "
            "or not stored): GPED. MU no better than the best constant MU: none.") in text
    assert "*fashion_mnist*: mean |ΔMU| against the teacher: GPED 0.078, Hydra 0.018; predicting zero MU: 0.190. " \
           "Worse than predicting zero: none." in text
    assert ("GPED's MU bias +0.057 = its predictive head's total-entropy bias -0.010 (mean H[E p] 0.153 against the "
            "teacher's 0.163) minus its entropy head's bias -0.067 (mean E[H] 0.057 against 0.124).") in text
    assert ("Training budgets: GPED: 1,499 steps of 100 inputs (149,900 seen, 478,811 parameters; targets: current "
            "sample); Hydra: 3,000 steps of 100 inputs (300,000 seen, 1,498,600 parameters; targets: cached "
            "logits).") in text


def test_comparison_reading_judges_closest_and_worse_among_the_students_with_skill():
    table = _comparison_table()
    # Hydra (closest by |ΔMU|) below the skill floor: GPED, the only one with skill, is the closest
    low = C.comparison_reading(table.assign(skill=table["method"].map({"GPED": 0.5, "Hydra": -0.61})))
    assert "Worse than predicting zero: GPED. Closest: GPED. No evidence (skill over the best constant below 0.05 " \
           "or not stored): Hydra." in low
    assert "Closest: Hydra" not in low
    # every student no evidence: neither closest nor worse is named
    none = C.comparison_reading(table.drop(columns=["skill", "mu_skill"]))
    assert "Worse than predicting zero and closest: no evidence (no student beats the best constant)." in none
    assert "Closest: " not in none and "Worse than predicting zero: " not in none


def test_sampler_reading_names_no_winner_when_the_seeds_do_not_separate_it():
    rows = []
    for candidate, values in (("BAOA", [0.0900, 0.0920]), ("SGNHT", [0.0911, 0.0912])):
        for seed, value in enumerate(values):
            common = dict(candidate=candidate, seed=seed, step=100, elapsed_s=1.0, teacher_nll=value,
                          teacher_recent_nll=value)
            rows += [dict(common, student=samplers.STUDENT_LABELS[0], student_nll=value, entropy_mae=float("nan")),
                     dict(common, student=samplers.STUDENT_LABELS[1], student_nll=float("nan"), entropy_mae=value)]
    text = samplers.sampler_reading(pd.DataFrame(rows))
    assert ("- teacher NLL: lowest BAOA 0.0910 ± 0.0014, next SGNHT 0.0912 ± 0.0001 over 2 seed(s) (lowest per seed: "
            "BAOA 1, SGNHT 1 (of 2 seeds)); the gap per seed, 0.0002 ± 0.0013, is within its spread: no winner is "
            "established.") in text
    one = samplers.sampler_reading(pd.DataFrame(rows)[lambda d: d["seed"] == 0])
    assert "one seed, so no spread to judge the gap by: no winner is established" in one
    # the entropy MAE names its caveat, its skill ranks highest first (here unknown: no evidence)
    assert "- entropy MAE (each student's error against its own teacher, whose entropies differ" in text
    assert "- entropy MAE skill: highest " in text and "equal work" not in text  # equal student updates: no line
    unequal = samplers.sampler_reading(pd.DataFrame(rows).assign(
        student_updates=lambda d: d["candidate"].map({"BAOA": 1_800, "SGNHT": 23_499})))
    assert ("The teachers ran equal work, their students did not: the predictive students took 1,800 (BAOA) to "
            "23,499 (SGNHT) updates") in unequal


def _in_distribution_downstream(seeds=(0,), flip=False, weak=None) -> pd.DataFrame:
    """FCNN's NLL and entropy MAE cells where GPED's mean is ahead in every cell; ``flip``: FCNN U_o largest's NLL
    winner changes between three seeds (GPED - EnD2 -0.0069, +0.0041, -0.0136: within the seeds' spread);
    ``weak``: the (estimator, student) whose GPED student is below the skill floor."""
    rows = []
    for seed in seeds:
        for est, size in SETTINGS:
            who = dict(model="fcnn", seed=seed, run_key=f"fcnn-{seed}", estimator=est, student=size, skill=0.5)
            gped = dict(who, skill=0.01 if (est, size) == weak else 0.5)
            nll = (-0.0069, 0.0041, -0.0136)[seed] if flip and (est, size) == ("U_o", "largest_width_multiplier") \
                else -0.02
            rows += [dict(gped, method="GPED", metric="nll", value=0.5 + nll),
                     dict(who, method="EnD2", metric="nll", value=0.5),
                     dict(gped, method="GPED", metric="entropy_mae", value=0.1),
                     dict(who, method="EnD2", metric="entropy_mae", value=0.2)]
    return pd.DataFrame(rows)


def test_experiment4_reading_says_gped_is_ahead_everywhere_only_where_every_cell_is_judged_and_separable():
    """"GPED has the lower NLL and entropy MAE in every cell we ran" was printed whenever no cell's mean favoured
    EnD2: also with a cell resting on a student below the skill floor, or whose winner changes between seeds
    within their spread. Now only where every cell is judged, separable and GPED's; else the counts."""
    every = "In distribution GPED has the lower NLL and entropy MAE in every cell we ran"
    weak = experiment4.experiment4_reading(_in_distribution_downstream(weak=("U_s", "base")))
    assert every not in weak
    assert ("In distribution GPED has the lower NLL or entropy MAE in 6 of 6 cells judged; 2 no evidence (a student "
            "below the skill floor or stored without its skill).") in weak
    flip = experiment4.experiment4_reading(_in_distribution_downstream(seeds=(0, 1, 2), flip=True))
    assert every not in flip and "GPED loses" not in flip
    assert ("In distribution GPED has the lower NLL or entropy MAE in 7 of 7 cells judged; 1 not separable (GPED's "
            "margin within its spread over the seeds).") in flip
    assert ("The seeds cannot separate 1 cell(s): NLL in FCNN U_o largest (GPED's margin +0.0055, its spread 0.0089; "
            "winner per seed: GPED, EnD2, GPED).") in flip
    assert f"{every}." in experiment4.experiment4_reading(_in_distribution_downstream())
    assert f"{every}, each separable over the seeds." in experiment4.experiment4_reading(
        _in_distribution_downstream(seeds=(0, 1, 2)))

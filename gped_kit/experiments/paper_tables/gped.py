"""The GPED paper's Tables 1-16 and Experiment 3's figures, transcribed as text and read into tidy tables (see
the package's docstring for the sources, the conventions and the paper's oddities)."""

from __future__ import annotations

import io

import pandas as pd

#: Model keys accepted by :func:`experiment2_table` / :func:`experiment2_long`.
MODELS = ("cnn_mnist", "fcnn", "cnn_cifar10")

DATASET_OF = {"fcnn": "mnist", "cnn_mnist": "mnist", "cnn_cifar10": "cifar10"}

#: Masking rate as printed in Tables 5-6 -> side m of the square mask (r = m^2 / 784).
MASK_SIZE_OF_RATE = {0.0: 0, 0.03: 5, 0.13: 10, 0.29: 15, 0.51: 20, 0.8: 25}

EXPERIMENT2_TABLES = {"cnn_mnist": "Table 5", "fcnn": "Table 6", "cnn_cifar10": "Table 7"}
#: The paper's figure of each Experiment 2 table (Figures 1, 4 and 5 draw Tables 5, 6 and 7).
EXPERIMENT2_FIGURES = {"Table 5": "Figure 1", "Table 6": "Figure 4", "Table 7": "Figure 5"}

#: Data setting of Experiment 4 as stated in the text (same as Experiment 3); see module doc.
EXPERIMENT4_SETTING = {
    "fcnn": {"labelled_size": 60000, "masking_rate": 0.29, "mask_size": 15},
    "cnn_mnist": {"labelled_size": 60000, "masking_rate": 0.29, "mask_size": 15},
    "cnn_cifar10": {"labelled_size": 20000, "masking_rate": 0.0, "mask_size": 0},
}

# ----------------------------------------------------------------------------- Table 1

_TABLE1 = """\
model,teacher_nll,student_nll,entropy_mae
fcnn,0.052,0.082,0.016
cnn_mnist,0.022,0.053,0.016
cnn_cifar10,0.671,0.932,0.245
"""

# ----------------------------------------------------------------------------- Tables 5-7
# Columns as printed: Num. training samples, Masking rate, NLL (Teacher), NLL (Student, U_o),
# NLL (Student, U_s), MAE (Entropy, U_o), MAE (Entropy, U_s). The paper leaves the size blank
# on continuation rows; it is written out here. Table 7 has no masking column (rate 0).

_EXPERIMENT2_HEADER = ("labelled_size,masking_rate,teacher_nll,student_nll_U_o,student_nll_U_s,"
                       "entropy_mae_U_o,entropy_mae_U_s\n")

_TABLE5_CNN_MNIST = """\
10000,0,0.048,0.214,0.218,0.025,0.030
10000,0.03,0.069,0.274,0.274,0.033,0.038
10000,0.13,0.161,0.509,0.509,0.058,0.069
10000,0.29,0.394,0.902,0.907,0.115,0.129
10000,0.51,1.099,1.615,1.630,0.194,0.170
10000,0.8,2.298,2.301,2.301,0.016,0.019
20000,0,0.034,0.126,0.126,0.020,0.021
20000,0.03,0.054,0.180,0.181,0.026,0.030
20000,0.13,0.123,0.342,0.344,0.053,0.066
20000,0.29,0.326,0.684,0.697,0.104,0.122
20000,0.51,1.050,1.369,1.378,0.145,0.150
20000,0.8,2.298,2.300,2.299,0.016,0.020
30000,0,0.028,0.084,0.086,0.017,0.019
30000,0.03,0.044,0.132,0.134,0.024,0.027
30000,0.13,0.106,0.292,0.294,0.051,0.061
30000,0.29,0.300,0.620,0.618,0.106,0.120
30000,0.51,1.044,1.307,1.308,0.130,0.141
30000,0.8,2.296,2.297,2.296,0.017,0.021
60000,0,0.022,0.053,0.053,0.016,0.017
60000,0.03,0.035,0.088,0.090,0.025,0.026
60000,0.13,0.090,0.219,0.221,0.049,0.058
60000,0.29,0.267,0.463,0.472,0.108,0.120
60000,0.51,1.024,1.184,1.187,0.118,0.127
60000,0.8,2.297,2.297,2.297,0.020,0.023
"""

_TABLE6_FCNN = """\
10000,0,0.137,0.184,0.243,0.013,0.018
10000,0.03,0.180,0.233,0.300,0.018,0.023
10000,0.13,0.312,0.389,0.483,0.031,0.040
10000,0.29,0.556,0.637,0.760,0.059,0.089
10000,0.51,1.183,1.229,1.371,0.111,0.135
10000,0.8,2.103,2.111,2.129,0.023,0.019
20000,0,0.089,0.115,0.161,0.011,0.015
20000,0.03,0.131,0.165,0.220,0.014,0.021
20000,0.13,0.230,0.280,0.366,0.024,0.042
20000,0.29,0.452,0.510,0.607,0.049,0.104
20000,0.51,1.080,1.120,1.215,0.094,0.112
20000,0.8,2.104,2.108,2.117,0.019,0.021
30000,0,0.071,0.083,0.124,0.011,0.014
30000,0.03,0.107,0.129,0.180,0.015,0.021
30000,0.13,0.201,0.243,0.314,0.028,0.052
30000,0.29,0.414,0.459,0.555,0.062,0.105
30000,0.51,1.044,1.082,1.172,0.091,0.105
30000,0.8,2.089,2.092,2.101,0.022,0.023
60000,0,0.052,0.054,0.082,0.016,0.020
60000,0.03,0.081,0.094,0.133,0.023,0.034
60000,0.13,0.155,0.186,0.240,0.043,0.068
60000,0.29,0.360,0.398,0.471,0.086,0.109
60000,0.51,1.010,1.033,1.107,0.106,0.099
60000,0.8,2.088,2.089,2.094,0.021,0.022
"""

_TABLE7_CNN_CIFAR10 = """\
10000,0,0.912,1.372,1.391,0.144,0.192
20000,0,0.798,1.184,1.179,0.210,0.231
50000,0,0.671,0.924,0.932,0.245,0.290
"""

_EXPERIMENT2_DATA = {"cnn_mnist": _TABLE5_CNN_MNIST, "fcnn": _TABLE6_FCNN, "cnn_cifar10": _TABLE7_CNN_CIFAR10}

# ----------------------------------------------------------------------------- Tables 2, 8-10
# Printed columns: NLL (Ensemble), NLL (GPED), NLL (EnD2), MAE Entropy (GPED), MAE Entropy (EnD2).
# Captions: Table 2 = U_s, largest width multiplier; 8 = U_s, base; 9 = U_o, base;
# 10 = U_o, largest width multiplier.

_IN_DISTRIBUTION = """\
table,estimator,student,model,nll_Ensemble,nll_GPED,nll_EnD2,entropy_mae_GPED,entropy_mae_EnD2
Table 2,U_s,largest_width_multiplier,fcnn,0.362,0.408,0.415,0.069,0.105
Table 2,U_s,largest_width_multiplier,cnn_mnist,0.269,0.296,0.321,0.086,0.106
Table 2,U_s,largest_width_multiplier,cnn_cifar10,0.799,0.859,0.907,0.146,0.328
Table 8,U_s,base,fcnn,0.362,0.412,0.452,0.063,0.113
Table 8,U_s,base,cnn_mnist,0.269,0.396,0.460,0.121,0.175
Table 8,U_s,base,cnn_cifar10,0.799,1.032,1.104,0.181,0.424
Table 9,U_o,base,fcnn,0.362,0.409,0.447,0.063,0.110
Table 9,U_o,base,cnn_mnist,0.269,0.447,0.460,0.121,0.183
Table 9,U_o,base,cnn_cifar10,0.799,1.015,1.056,0.181,0.494
Table 10,U_o,largest_width_multiplier,fcnn,0.362,0.401,0.408,0.069,0.099
Table 10,U_o,largest_width_multiplier,cnn_mnist,0.269,0.305,0.314,0.086,0.103
Table 10,U_o,largest_width_multiplier,cnn_cifar10,0.799,0.881,0.885,0.146,0.338
"""

# ----------------------------------------------------------------------------- Tables 3, 11-13
# Printed columns: Uncertainty, Ensemble, GPED (ours), EnD2 (AUROC). Captions: Table 3 = U_s,
# largest width multiplier; 11 = U_s, base; 12 = U_o, base; 13 = U_o, largest width multiplier.

_OOD = """\
table,estimator,student,model,ood_dataset,uncertainty,Ensemble,GPED,EnD2
Table 3,U_s,largest_width_multiplier,fcnn,kmnist,total,0.929,0.867,0.816
Table 3,U_s,largest_width_multiplier,fcnn,kmnist,knowledge,0.976,0.928,0.899
Table 3,U_s,largest_width_multiplier,fcnn,notmnist,total,0.944,0.670,0.652
Table 3,U_s,largest_width_multiplier,fcnn,notmnist,knowledge,0.990,0.762,0.681
Table 3,U_s,largest_width_multiplier,cnn_mnist,kmnist,total,0.894,0.882,0.881
Table 3,U_s,largest_width_multiplier,cnn_mnist,kmnist,knowledge,0.956,0.932,0.952
Table 3,U_s,largest_width_multiplier,cnn_mnist,notmnist,total,0.888,0.882,0.860
Table 3,U_s,largest_width_multiplier,cnn_mnist,notmnist,knowledge,0.946,0.934,0.939
Table 3,U_s,largest_width_multiplier,cnn_cifar10,tinyimagenet,total,0.729,0.762,0.721
Table 3,U_s,largest_width_multiplier,cnn_cifar10,tinyimagenet,knowledge,0.796,0.808,0.792
Table 3,U_s,largest_width_multiplier,cnn_cifar10,lsun,total,0.790,0.779,0.747
Table 3,U_s,largest_width_multiplier,cnn_cifar10,lsun,knowledge,0.752,0.767,0.713
Table 11,U_s,base,fcnn,kmnist,total,0.929,0.875,0.761
Table 11,U_s,base,fcnn,kmnist,knowledge,0.948,0.926,0.861
Table 11,U_s,base,fcnn,notmnist,total,0.944,0.736,0.659
Table 11,U_s,base,fcnn,notmnist,knowledge,0.990,0.803,0.720
Table 11,U_s,base,cnn_mnist,kmnist,total,0.894,0.829,0.887
Table 11,U_s,base,cnn_mnist,kmnist,knowledge,0.956,0.887,0.933
Table 11,U_s,base,cnn_mnist,notmnist,total,0.888,0.841,0.828
Table 11,U_s,base,cnn_mnist,notmnist,knowledge,0.946,0.902,0.889
Table 11,U_s,base,cnn_cifar10,tinyimagenet,total,0.729,0.737,0.726
Table 11,U_s,base,cnn_cifar10,tinyimagenet,knowledge,0.796,0.773,0.773
Table 11,U_s,base,cnn_cifar10,lsun,total,0.790,0.760,0.733
Table 11,U_s,base,cnn_cifar10,lsun,knowledge,0.752,0.718,0.653
Table 12,U_o,base,fcnn,kmnist,total,0.929,0.847,0.802
Table 12,U_o,base,fcnn,kmnist,knowledge,0.948,0.907,0.912
Table 12,U_o,base,fcnn,notmnist,total,0.944,0.782,0.762
Table 12,U_o,base,fcnn,notmnist,knowledge,0.990,0.847,0.890
Table 12,U_o,base,cnn_mnist,kmnist,total,0.894,0.829,0.884
Table 12,U_o,base,cnn_mnist,kmnist,knowledge,0.956,0.890,0.937
Table 12,U_o,base,cnn_mnist,notmnist,total,0.888,0.848,0.859
Table 12,U_o,base,cnn_mnist,notmnist,knowledge,0.946,0.907,0.918
Table 12,U_o,base,cnn_cifar10,tinyimagenet,total,0.729,0.747,0.703
Table 12,U_o,base,cnn_cifar10,tinyimagenet,knowledge,0.796,0.763,0.747
Table 12,U_o,base,cnn_cifar10,lsun,total,0.790,0.759,0.728
Table 12,U_o,base,cnn_cifar10,lsun,knowledge,0.752,0.736,0.650
Table 13,U_o,largest_width_multiplier,fcnn,kmnist,total,0.929,0.895,0.833
Table 13,U_o,largest_width_multiplier,fcnn,kmnist,knowledge,0.948,0.944,0.938
Table 13,U_o,largest_width_multiplier,fcnn,notmnist,total,0.944,0.751,0.714
Table 13,U_o,largest_width_multiplier,fcnn,notmnist,knowledge,0.990,0.826,0.835
Table 13,U_o,largest_width_multiplier,cnn_mnist,kmnist,total,0.894,0.892,0.867
Table 13,U_o,largest_width_multiplier,cnn_mnist,kmnist,knowledge,0.956,0.940,0.956
Table 13,U_o,largest_width_multiplier,cnn_mnist,notmnist,total,0.888,0.887,0.856
Table 13,U_o,largest_width_multiplier,cnn_mnist,notmnist,knowledge,0.946,0.941,0.935
Table 13,U_o,largest_width_multiplier,cnn_cifar10,tinyimagenet,total,0.729,0.750,0.705
Table 13,U_o,largest_width_multiplier,cnn_cifar10,tinyimagenet,knowledge,0.796,0.798,0.783
Table 13,U_o,largest_width_multiplier,cnn_cifar10,lsun,total,0.790,0.779,0.745
Table 13,U_o,largest_width_multiplier,cnn_cifar10,lsun,knowledge,0.752,0.753,0.716
"""

# ----------------------------------------------------------------------------- Tables 4, 14-16
# Printed columns: Uncertainty, GPED (ours), EnD2 as "mean +- std" of nDCG@20 (100 random test
# inputs, 500 trials). No Ensemble column (the ensemble's ranking is the reference).
# Captions: Table 4 = U_s, largest width multiplier; 14 = U_s, base; 15 = U_o, base;
# 16 = U_o, largest width multiplier.

_NDCG = """\
table,estimator,student,model,uncertainty,GPED_mean,GPED_std,EnD2_mean,EnD2_std
Table 4,U_s,largest_width_multiplier,fcnn,total,0.954,0.02,0.946,0.021
Table 4,U_s,largest_width_multiplier,fcnn,knowledge,0.924,0.03,0.941,0.028
Table 4,U_s,largest_width_multiplier,cnn_mnist,total,0.929,0.034,0.916,0.032
Table 4,U_s,largest_width_multiplier,cnn_mnist,knowledge,0.888,0.032,0.876,0.045
Table 4,U_s,largest_width_multiplier,cnn_cifar10,total,0.935,0.022,0.919,0.027
Table 4,U_s,largest_width_multiplier,cnn_cifar10,knowledge,0.885,0.033,0.889,0.034
Table 14,U_s,base,fcnn,total,0.947,0.022,0.911,0.031
Table 14,U_s,base,fcnn,knowledge,0.919,0.030,0.895,0.042
Table 14,U_s,base,cnn_mnist,total,0.852,0.023,0.780,0.040
Table 14,U_s,base,cnn_mnist,knowledge,0.823,0.038,0.768,0.044
Table 14,U_s,base,cnn_cifar10,total,0.895,0.035,0.853,0.041
Table 14,U_s,base,cnn_cifar10,knowledge,0.825,0.045,0.809,0.051
Table 15,U_o,base,fcnn,total,0.942,0.023,0.907,0.034
Table 15,U_o,base,fcnn,knowledge,0.922,0.024,0.907,0.037
Table 15,U_o,base,cnn_mnist,total,0.871,0.050,0.818,0.048
Table 15,U_o,base,cnn_mnist,knowledge,0.815,0.050,0.747,0.066
Table 15,U_o,base,cnn_cifar10,total,0.903,0.029,0.840,0.047
Table 15,U_o,base,cnn_cifar10,knowledge,0.854,0.041,0.785,0.082
Table 16,U_o,largest_width_multiplier,fcnn,total,0.962,0.017,0.940,0.024
Table 16,U_o,largest_width_multiplier,fcnn,knowledge,0.953,0.023,0.922,0.020
Table 16,U_o,largest_width_multiplier,cnn_mnist,total,0.951,0.017,0.908,0.034
Table 16,U_o,largest_width_multiplier,cnn_mnist,knowledge,0.920,0.028,0.870,0.036
Table 16,U_o,largest_width_multiplier,cnn_cifar10,total,0.940,0.021,0.901,0.019
Table 16,U_o,largest_width_multiplier,cnn_cifar10,knowledge,0.883,0.035,0.883,0.036
"""


def _read(text: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text))


def _check_model(model: str) -> str:
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; allowed: {', '.join(MODELS)}")
    return model


def _add_setting(df: pd.DataFrame, setting: dict | None = None) -> pd.DataFrame:
    """Insert dataset and the data setting (default: Experiment 4's) after ``model``."""
    setting = EXPERIMENT4_SETTING if setting is None else setting
    df = df.copy()
    pos = df.columns.get_loc("model") + 1
    df.insert(pos, "dataset", df["model"].map(DATASET_OF))
    for i, key in enumerate(("labelled_size", "masking_rate", "mask_size")):
        df.insert(pos + 1 + i, key, df["model"].map(lambda m, k=key: setting[m][k]))
    df["labelled_size"] = df["labelled_size"].astype(int)
    df["mask_size"] = df["mask_size"].astype(int)
    df["masking_rate"] = df["masking_rate"].astype(float)
    return df


def table1() -> pd.DataFrame:
    """Table 1 (Experiment 1): one row per model, student = teacher architecture, full data.

    Columns: ``model``, ``dataset``, ``teacher_nll``, ``student_nll`` (predictive distilled
    with U_s), ``entropy_mae`` (expected entropy distilled with U_o), ``table``.
    """
    df = _read(_TABLE1)
    df.insert(1, "dataset", df["model"].map(DATASET_OF))
    df["table"] = "Table 1"
    return df


def experiment2_table(model: str) -> pd.DataFrame:
    """Table 5 (``"cnn_mnist"``), 6 (``"fcnn"``) or 7 (``"cnn_cifar10"``), one row per
    (labelled_size, masking_rate), laid out as printed.

    Columns: ``model``, ``dataset``, ``labelled_size`` (int), ``masking_rate`` (float, as
    printed), ``mask_size`` (int m, r = m^2/784), ``teacher_nll``, ``student_nll_U_o``,
    ``student_nll_U_s``, ``entropy_mae_U_o``, ``entropy_mae_U_s``, ``table``.
    MNIST tables have 4 sizes x 6 rates = 24 rows; Table 7 has sizes 10000/20000/50000 at rate 0.
    """
    _check_model(model)
    df = _read(_EXPERIMENT2_HEADER + _EXPERIMENT2_DATA[model])
    df["labelled_size"] = df["labelled_size"].astype(int)
    df["masking_rate"] = df["masking_rate"].astype(float)
    df.insert(0, "model", model)
    df.insert(1, "dataset", DATASET_OF[model])
    df.insert(4, "mask_size", df["masking_rate"].map(MASK_SIZE_OF_RATE).astype(int))
    df["table"] = EXPERIMENT2_TABLES[model]
    return df


def experiment2_long(model: str) -> pd.DataFrame:
    """:func:`experiment2_table` melted to one row per (labelled_size, masking_rate, estimator).

    Columns: ``model``, ``dataset``, ``labelled_size``, ``masking_rate``, ``mask_size``,
    ``estimator`` (``"U_o"``/``"U_s"``), ``teacher_nll``, ``student_nll``, ``nll_gap``
    (student - teacher, computed here and rounded to the printed 3 decimals),
    ``entropy_mae``, ``table``. Same key and metric column names as our measured
    :func:`gped_kit.experiments.experiment2.experiment2_cells` (plus ``dataset`` and ``table``).
    """
    wide = experiment2_table(model)
    keys = ["model", "dataset", "labelled_size", "masking_rate", "mask_size"]
    parts = []
    for est in ("U_o", "U_s"):
        part = wide[keys + ["teacher_nll"]].copy()
        part.insert(len(keys), "estimator", est)
        part["student_nll"] = wide[f"student_nll_{est}"]
        part["nll_gap"] = (part["student_nll"] - part["teacher_nll"]).round(3)
        part["entropy_mae"] = wide[f"entropy_mae_{est}"]
        part["table"] = wide["table"]
        parts.append(part)
    long = pd.concat(parts, ignore_index=True)
    return long.sort_values(["labelled_size", "masking_rate", "estimator"], kind="stable").reset_index(drop=True)


def experiment4_in_distribution() -> pd.DataFrame:
    """Tables 2, 8, 9, 10: in-distribution test metrics, Ensemble vs GPED vs EnD2.

    One row per printed cell. Columns: ``model``, ``dataset``, ``labelled_size``,
    ``masking_rate``, ``mask_size`` (the setting stated in the text, see module doc),
    ``estimator`` (for the predictive distribution), ``student`` (``"base"`` /
    ``"largest_width_multiplier"``), ``method`` (``"Ensemble"``/``"GPED"``/``"EnD2"``),
    ``metric`` (``"nll"`` or ``"entropy_mae"``; the Ensemble has only ``"nll"``), ``value``,
    ``table``.
    """
    wide = _read(_IN_DISTRIBUTION)
    ids = ["model", "estimator", "student", "table"]
    long = wide.melt(id_vars=ids, var_name="column", value_name="value")
    split = long["column"].str.rsplit("_", n=1, expand=True)
    long["metric"], long["method"] = split[0], split[1]
    long = _add_setting(long)
    cols = ["model", "dataset", "labelled_size", "masking_rate", "mask_size", "estimator", "student",
            "method", "metric", "value", "table"]
    return _sort(long[cols], ["metric", "method"])


def experiment4_ood() -> pd.DataFrame:
    """Tables 3, 11, 12, 13: AUROC of OOD detection, Ensemble vs GPED vs EnD2.

    One row per printed cell. Columns: ``model``, ``dataset`` (in-distribution),
    ``labelled_size``, ``masking_rate``, ``mask_size`` (stated setting, see module doc),
    ``ood_dataset`` (``"kmnist"``, ``"notmnist"``, ``"tinyimagenet"``, ``"lsun"``),
    ``uncertainty`` (``"total"`` or ``"knowledge"``), ``estimator``, ``student``, ``method``,
    ``metric`` (``"auroc"``), ``value``, ``table``.
    """
    wide = _read(_OOD)
    ids = ["model", "ood_dataset", "uncertainty", "estimator", "student", "table"]
    long = wide.melt(id_vars=ids, var_name="method", value_name="value")
    long["metric"] = "auroc"
    long = _add_setting(long)
    cols = ["model", "dataset", "labelled_size", "masking_rate", "mask_size", "ood_dataset", "uncertainty",
            "estimator", "student", "method", "metric", "value", "table"]
    return _sort(long[cols], ["ood_dataset", "uncertainty", "method"])


def experiment4_ndcg() -> pd.DataFrame:
    """Tables 4, 14, 15, 16: nDCG@20 of the uncertainty ranking against the ensemble's
    (100 random test inputs, 500 trials), GPED vs EnD2.

    One row per printed "mean +- std" cell. Columns: ``model``, ``dataset``,
    ``labelled_size``, ``masking_rate``, ``mask_size`` (stated setting, see module doc),
    ``uncertainty`` (``"total"``/``"knowledge"``), ``estimator``, ``student``, ``method``
    (``"GPED"``/``"EnD2"``), ``metric`` (``"ndcg@20"``), ``value`` (mean), ``std``, ``table``.
    """
    wide = _read(_NDCG)
    ids = ["model", "uncertainty", "estimator", "student", "table"]
    parts = []
    for method in ("GPED", "EnD2"):
        part = wide[ids].copy()
        part["method"] = method
        part["value"] = wide[f"{method}_mean"]
        part["std"] = wide[f"{method}_std"]
        parts.append(part)
    long = pd.concat(parts, ignore_index=True)
    long["metric"] = "ndcg@20"
    long = _add_setting(long)
    cols = ["model", "dataset", "labelled_size", "masking_rate", "mask_size", "uncertainty", "estimator",
            "student", "method", "metric", "value", "std", "table"]
    return _sort(long[cols], ["uncertainty", "method"])


_TABLE_ORDER = {"Table 2": 0, "Table 8": 1, "Table 9": 2, "Table 10": 3,
                "Table 3": 0, "Table 11": 1, "Table 12": 2, "Table 13": 3,
                "Table 4": 0, "Table 14": 1, "Table 15": 2, "Table 16": 3}
_LEVEL_ORDER = {
    "method": {"Ensemble": 0, "GPED": 1, "EnD2": 2},
    "metric": {"nll": 0, "entropy_mae": 1},
    "uncertainty": {"total": 0, "knowledge": 1},
    "ood_dataset": {"kmnist": 0, "notmnist": 1, "tinyimagenet": 2, "lsun": 3},
}


def _sort(df: pd.DataFrame, extra: list[str]) -> pd.DataFrame:
    """Rows in the paper's order: table, model (FCNN, CNN-MNIST, CNN-CIFAR10), then ``extra``."""
    order = {"table": _TABLE_ORDER, "model": {"fcnn": 0, "cnn_mnist": 1, "cnn_cifar10": 2}, **_LEVEL_ORDER}
    by = ["table", "model", *extra]
    return (df.sort_values(by, key=lambda col: col.map(order[col.name]), kind="stable")
            .reset_index(drop=True))


# ----------------------------------------------------------------------------- Experiment 3
# Section 4, Experiment 3 (Figure 2 and its text) and Appendix B.2 (Figures 6-13). The figures
# themselves are not in the text; what is transcribed is what their captions and the text say:
# per figure, which search method gave the best ("optimal") student and its number of
# parameters and FLOPS as multiples of the base student's (architecture = teacher's). Every
# caption says the optimal student "is obtained with group l1/l2 pruning". ``metric`` uses the
# column names of gped_kit.search.METRICS.

#: Data setting of Experiment 3 (Section 4 and the figure captions): MNIST at N = 60,000 with
#: masking rate 0.29 (m = 15); CIFAR-10 sub-sampled to N = 20,000, no masking.
EXPERIMENT3_SETTING = {
    "fcnn": {"labelled_size": 60000, "masking_rate": 0.29, "mask_size": 15},
    "cnn_mnist": {"labelled_size": 60000, "masking_rate": 0.29, "mask_size": 15},
    "cnn_cifar10": {"labelled_size": 20000, "masking_rate": 0.0, "mask_size": 0},
}

_EXPERIMENT3_FIGURES = """\
figure,model,metric,best_method,params_ratio,flops_ratio
Figure 2,cnn_mnist,student_nll,group_lasso,6.6,6.4
Figure 6,cnn_mnist,student_accuracy,group_lasso,6.6,6.4
Figure 7,cnn_mnist,entropy_mae,group_lasso,1.8,4.3
Figure 8,fcnn,student_accuracy,group_lasso,9.9,10
Figure 9,fcnn,student_nll,group_lasso,9.9,10
Figure 10,fcnn,entropy_mae,group_lasso,4.2,4.2
Figure 11,cnn_cifar10,student_nll,group_lasso,4.7,5.2
Figure 12,cnn_cifar10,student_accuracy,group_lasso,5.4,5.6
Figure 13,cnn_cifar10,entropy_mae,group_lasso,1.6,2.8
"""


def experiment3_figures() -> pd.DataFrame:
    """Figures 2 and 6-13 (Experiment 3), one row per figure: ``figure``, ``model``, ``dataset``,
    the data setting (``labelled_size``, ``masking_rate``, ``mask_size``), ``metric``
    (``student_nll``, ``student_accuracy`` or ``entropy_mae``), ``best_method`` (always
    ``group_lasso``: "the optimal student model for this configuration is obtained with group
    l1/l2 pruning") and ``params_ratio`` / ``flops_ratio``: the optimal student's parameters and
    FLOPS as multiples of the base student's ("approximately 6.6x the number of parameters and
    6.4x the FLOPS of the base student model")."""
    df = _add_setting(_read(_EXPERIMENT3_FIGURES), EXPERIMENT3_SETTING)
    df["params_ratio"] = df["params_ratio"].astype(float)
    df["flops_ratio"] = df["flops_ratio"].astype(float)
    return df


def experiment3_figure2() -> dict[str, float]:
    """The numbers the text gives with Figure 2 (CNN, MNIST, N = 60,000, masking rate 0.29):
    the base student's NLL 0.469 "at approximately 0.48 x 10^6 FLOPs and 0.03 x 10^6
    parameters", the NLL "reduced to 0.30" by the search, the optimal student's ratios 6.6x
    (parameters) and 6.4x (FLOPS), and, for reference, the teacher ensemble's NLL at that cell
    (Table 5: 0.267). The paper does not say whether its FLOPs count multiply-accumulates once or
    twice."""
    return {"base_student_nll": 0.469, "base_student_flops": 0.48e6, "base_student_params": 0.03e6,
            "searched_nll": 0.30, "params_ratio": 6.6, "flops_ratio": 6.4, "teacher_nll": 0.267}

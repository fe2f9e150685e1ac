"""The Hydra paper's (002) MNIST numbers, transcribed."""

from __future__ import annotations

import pandas as pd

from .gped import _read

# Table 2 (MNIST; mean of 3 runs; an ensemble of 50 MLPs 784-200-200-10) and Table 5 (cost).
# The paper's Brier score is sum_c p_c^2 - 2 p_y (Ovadia et al.'s convention): the usual
# multiclass Brier score minus 1, which ``brier_standard`` gives (= brier + 1).
_HYDRA_TABLE2 = """\
method,accuracy,nll,brier,mu,params,flops
Ensemble (M=50),0.9851,0.0439,-0.9780,9.97e-6,9960500,9.0e7
Prior Networks (EnD2),0.9842,0.0521,-0.9285,0.1158,199210,1.8e6
Knowledge distillation,0.9843,0.0497,-0.9764,,199210,1.8e6
Hydra (head 100-100-10),0.9857,0.0465,-0.9776,2.28e-5,1757700,2.5e7
"""
# Table 1: mean |MU_model - MU_ensemble| (MNIST part; knowledge distillation: N/A).
_HYDRA_TABLE1 = """\
eval_set,Prior Networks (EnD2),Hydra
MNIST (test),2.60e-5,3.11e-5
MNIST (shifted),0.1938,0.1552
MNIST (rotated),0.2943,0.0528
Fashion-MNIST,0.1636,0.2717
"""


def hydra_mnist() -> pd.DataFrame:
    """Hydra paper (002), Tables 2 and 5 for MNIST: accuracy, NLL, Brier score (their convention,
    see ``brier_standard``), model uncertainty MU, parameters and FLOPs, per method."""
    df = _read(_HYDRA_TABLE2)
    df["brier_standard"] = df["brier"] + 1.0
    return df


def hydra_mu_difference() -> pd.DataFrame:
    """Hydra paper (002), Table 1 (MNIST rows): mean |Delta MU| against the ensemble, per evaluation set."""
    return _read(_HYDRA_TABLE1)

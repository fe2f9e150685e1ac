"""The words the experiments' readings share: the kit's names for models, student sizes and metrics, lists and
ranges of numbers in prose. A reading (each experiment's ``reading`` module) takes the tables a notebook
already holds and returns Markdown, so that no number in a notebook's prose is typed."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

#: Printed names of the kit's models and student sizes.
MODEL_NAMES = {"fcnn": "FCNN", "cnn_mnist": "CNN-MNIST", "cnn_cifar10": "CNN-CIFAR10"}
SIZE_NAMES = {"base": "base", "largest_width_multiplier": "largest"}
METRIC_NAMES = {"nll": "NLL", "entropy_mae": "entropy MAE", "auroc": "OOD AUROC", "ndcg@20": "nDCG@20"}


def model_name(name: str) -> str:
    """The printed name of a model (``"fcnn"`` -> ``"FCNN"``)."""
    return MODEL_NAMES.get(name, name)


def method_name(label: str) -> str:
    """The printed name of a method label or of a text naming methods: ``"EnD2"`` -> ``"EnD²"``,
    ``"EnD2 (tau = 2.5)"`` -> ``"EnD² (τ = 2.5)"`` (EnD²'s temperature is tau, T the chain length)."""
    return label.replace("EnD2", "EnD²").replace("(tau = ", "(τ = ")


def join_words(items: Iterable[str], empty: str = "none") -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``; ``empty`` for none."""
    items = list(items)
    if not items:
        return empty
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def value_range(low: float, high: float, fmt: str = ".3f") -> str:
    """``"0.640–0.724"``, or one value when both are the same at that precision."""
    a, b = format(low, fmt), format(high, fmt)
    return a if a == b else f"{a}–{b}"


def signed_range(low: float, high: float) -> str:
    """``"+0.010 to +0.042"``, or one signed value when both are the same at three decimals."""
    a, b = format(low, "+.3f"), format(high, "+.3f")
    return a if a == b else f"{a} to {b}"


def heading(title: str, profile: str | None) -> str:
    """A reading's bold first line, naming the profile it was written from."""
    where = f" ({profile!r} profile" if profile else " ("
    return f"**{title}**{where}{', ' if profile else ''}written from the stored results)."


def setting(row: pd.Series) -> str:
    """A student of Experiment 4 in words: model, estimator and size (``"FCNN U_o largest"``)."""
    return f"{model_name(row['model'])} {row['estimator']} {SIZE_NAMES.get(row['student'], row['student'])}"

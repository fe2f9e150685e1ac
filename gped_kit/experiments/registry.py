"""The registry: every notebook's experiment, one line each.

Each entry is the :class:`~gped_kit.experiments.frame.Experiment` its package declares: its profiles, chains,
summary, the profiles it shows, what a run stores, the lines its checks print and its rows of the README's
claims table. The tools around the notebooks read them here: the batch runner (:mod:`gped_kit.cli.batch`)
checks a run's settings and overrides before it starts any notebook, ``python -m gped_kit.cli.store missing``
asks what a profile lacks, ``python -m gped_kit.cli.readme`` asks every experiment for its README rows,
``tests/test_paper_profile.py`` runs every notebook with a scaled paper profile and checks its store, and
``benchmarks/paper_profile_work.py`` counts the work of every paper profile.

**Adding a notebook** is the notebook, one experiment package (its ``notebook`` module declaring the
:class:`~gped_kit.experiments.frame.Experiment`) and one line in :data:`EXPERIMENTS` (``tests/test_registry.py``
checks that every notebook is registered and that an entry's parameters agree with the notebook's parameters
cell; docs/library.md says how).
"""

from __future__ import annotations

from pathlib import Path

from . import comparison, experiment1, experiment2, experiment3, experiment4, quickstart, samplers, thesis, your_model
from .frame import Experiment

#: Every notebook of ``notebooks/``, in order.
EXPERIMENTS: tuple[Experiment, ...] = (
    quickstart.EXPERIMENT,
    experiment1.EXPERIMENT,
    experiment2.MNIST,
    experiment2.CIFAR10,
    experiment2.FIGURE3,
    experiment3.EXPERIMENT,
    experiment4.EXPERIMENT,
    comparison.EXPERIMENT,
    thesis.EXPERIMENT,
    your_model.EXPERIMENT,
    samplers.EXPERIMENT,
)

#: The experiments by notebook name.
NOTEBOOKS: dict[str, Experiment] = {e.name: e for e in EXPERIMENTS}


def notebook(name: str) -> Experiment:
    """The experiment of a notebook by its name (``"05_experiment3_search"``, with or without ``.ipynb``)
    or its number (``"05"``); ``ValueError`` lists the registered names."""
    stem = Path(name).stem if name.endswith(".ipynb") else name
    if stem in NOTEBOOKS:
        return NOTEBOOKS[stem]
    found = [entry for key, entry in NOTEBOOKS.items() if key.split("_", 1)[0] == stem]
    if len(found) == 1:
        return found[0]
    raise ValueError(f"notebook {name!r} is not registered; registered: {sorted(NOTEBOOKS)}")


__all__ = ["EXPERIMENTS", "NOTEBOOKS", "notebook"]

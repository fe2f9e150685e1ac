"""Figures and interactive explorers for the notebooks: :mod:`~gped_kit.viz.plots` draws the
paper's figures from tables the experiments computed and saves them (PNG, PDF) with their tables
(CSV, Markdown); :mod:`~gped_kit.viz.widgets` holds the ipywidgets explorers (masking and
Experiment 2, Figure 3; the Experiment 3 Pareto frontiers), which read results back from the
results store. Nothing here computes or stores results."""

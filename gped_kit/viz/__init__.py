"""Figures, tables and interactive explorers for the notebooks: :mod:`~gped_kit.viz.plots` draws the
paper's figures from tables the experiments computed and saves them (PNG, PDF) with their tables
(CSV, Markdown); :mod:`~gped_kit.viz.thesis` draws the thesis toys' figures;
:mod:`~gped_kit.viz.theme` is the kit's one plotting theme (fonts, grid, palette, a colour per
method), applied by every plotting function while it draws and undone when it returns;
:mod:`~gped_kit.viz.tables` shows tables complete, missing values as "—";
:mod:`~gped_kit.viz.figure3` draws the paper's Figure 3 (masked digits);
:mod:`~gped_kit.viz.masking_explorer` (masking rate and Experiment 2) and
:mod:`~gped_kit.viz.pareto_explorer` (the Experiment 3 Pareto frontiers) are the ipywidgets
explorers, which read results back from the results store; :mod:`~gped_kit.viz.snapshot` keeps
their static images for viewers without a kernel. Nothing here computes or stores results."""

"""Figures, tables and interactive explorers for the notebooks: :mod:`~gped_kit.viz.plots` draws the
paper's figures from tables the experiments computed and saves them (PNG, PDF) with their tables
(CSV, Markdown); :mod:`~gped_kit.viz.thesis` draws the thesis toys' figures;
:mod:`~gped_kit.viz.theme` is the kit's one plotting theme (fonts, grid, palette, a colour per
method), applied by every plotting function while it draws and undone when it returns;
:mod:`~gped_kit.viz.tables` shows tables complete, missing values as "—";
:mod:`~gped_kit.viz.widgets` holds the ipywidgets explorers (masking and Experiment 2, Figure 3;
the Experiment 3 Pareto frontiers), which read results back from the results store. Nothing here
computes or stores results."""

"""The notebooks' interactive explorers and reports, on top of the experiments:
:mod:`~gped_kit.viz.masking_explorer` (masking rate and Experiment 2) and
:mod:`~gped_kit.viz.pareto_explorer` (the Experiment 3 Pareto frontiers) are the ipywidgets
explorers, which read results back from the results store; :mod:`~gped_kit.viz.snapshot` keeps
their static images for viewers without a kernel; :mod:`~gped_kit.viz.report` is what a notebook
says of its own run. The figures are drawn by each experiment's ``figures`` module
(e.g. :mod:`gped_kit.experiments.experiment3.figures`) on the base of :mod:`gped_kit.plotting`
(theme, layout helpers, saving). Nothing here computes or stores results."""

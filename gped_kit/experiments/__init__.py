"""Experiments: the results store, chains run through it, profiles (settings composed from the
library's configurations, overrides resolved in :mod:`.settings`), the paper's settings and tables,
one module (or package) per experiment of paper 003 (and the comparisons with EnD2, Hydra and
Papamakarios' thesis), and the registry of the notebooks (:mod:`.registry`). Notebooks call
these; nothing below (engine, core, models, data, toys, baselines) imports from here."""

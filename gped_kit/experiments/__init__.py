"""Experiments: the results store and the chains run through it (:mod:`.store`, :mod:`.chains`, and :mod:`.derived`
for what is derived from a chain's full state, keyed by :mod:`.numerics`), profiles (settings composed from the
library's configurations, overrides resolved in :mod:`.settings`), the paper's settings and tables
(:mod:`.paper`, :mod:`.paper_tables`), one package per experiment of paper 003 and of the comparisons with EnD2,
Hydra and Papamakarios' thesis (``experiment1`` ... ``experiment4``, ``comparison``, ``thesis``, ``samplers``,
and the ``quickstart`` module), each declaring its notebook as an :class:`~.frame.Experiment`, and the registry
of the notebooks (:mod:`.registry`, one line per experiment). Notebooks call these; nothing below (engine, core,
models, data, toys, baselines) imports from here."""

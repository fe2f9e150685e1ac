"""Experiments: the results store, chains run through it, profiles, the paper's settings and
tables, and one module per experiment of paper 003 (and the comparisons with EnD2, Hydra and
Papamakarios' thesis). Notebooks call these; nothing below (engine, core, models, data,
baselines) imports from here."""

"""Methods GPED is compared with: EnD2 (a target of the engine), Hydra (multi-head students on
posterior snapshots) and the online distillation of Papamakarios' thesis (toy problems)."""

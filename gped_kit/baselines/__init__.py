"""Methods GPED is compared with on the engine's chains: EnD2 (a target of the engine) and Hydra
(multi-head students on posterior snapshots). The online distillation of Papamakarios' thesis on
its toy problems is :mod:`gped_kit.toys`."""

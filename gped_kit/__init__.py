"""gped-kit: Generalized Bayesian Posterior Expectation Distillation (Vadera, Jalaian, Marlin).

Packages by role; dependencies point one way (each imports only from those above it):

* :mod:`gped_kit.core`        -- pure numerics: SGLD (Eq. 7), Adam, likelihoods, targets g, estimators
  U_s / U_o (Eqs. 9-10), losses (Eqs. 8, 11), metrics, uncertainty decomposition, config records
* :mod:`gped_kit.models`      -- the paper's networks as presets, any ``nn.Module`` from a specification,
  pruning, cost (parameters, FLOPs, latency)
* :mod:`gped_kit.data`        -- data sets under one root, OOD sets, the paper's manipulations, the
  engine's data container for any tensors or datasets
* :mod:`gped_kit.engine`      -- Algorithm 1 as state and step functions, one chain or a vmapped batch,
  checkpoints
* :mod:`gped_kit.baselines`   -- EnD2, Hydra, the thesis' toy problems
* :mod:`gped_kit.experiments` -- the results store, profiles, the paper's settings and tables, one module
  per experiment
* :mod:`gped_kit.viz`         -- figures and widgets
* :mod:`gped_kit.cli`         -- the headless notebook runner (``python -m gped_kit.cli.batch``)
"""

__version__ = "0.2.0"

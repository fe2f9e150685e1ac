"""gped-kit: Generalized Bayesian Posterior Expectation Distillation (Vadera, Jalaian, Marlin).

Modules, one per concept of the paper:

* :mod:`gped_kit.data`     -- MNIST & co. under one data root, subsampling D, square masking, D' perturbation
* :mod:`gped_kit.models`   -- teacher/student architectures (Appendix A.2), width multipliers, output heads
* :mod:`gped_kit.samplers` -- SGLD in the paper's convention (Eq. 7)
* :mod:`gped_kit.targets`  -- posterior expectations g, estimators U_s / U_o (Eqs. 9-10), test-set accumulators
* :mod:`gped_kit.losses`   -- distillation losses and the group l1/l2 regulariser
* :mod:`gped_kit.distill`  -- Algorithm 1: one chain, many students, resumable
* :mod:`gped_kit.metrics`  -- NLL, accuracy, MAE, entropies
* :mod:`gped_kit.batch`    -- headless papermill batch runs of the notebooks
"""

__version__ = "0.1.0"

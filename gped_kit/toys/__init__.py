"""The toy posteriors of Papamakarios' thesis (paper 001, Chapter 3): online vs batch distillation
of an MCMC posterior, the input generator of the distillation inputs, and derivative matching.

Two toys, each small enough to run on a CPU in seconds, each in its own module:

* :mod:`.mog`: the **Bayesian mixture of Gaussians** (Section 3.2.3, Appendix D), Gibbs sampling
  of the unknown means, distilled into a 3-component MoG by batch or online EM;
* :mod:`.logreg`: the **2-D Bayesian logistic regression** (Section 3.3.4), slice sampling, Eq.
  3.44 students trained by SGD with cross-entropy or the derivative square error, batch or
  online, with each input generator.

**Memory** (column ``memory_bytes``) is the sum of ``nbytes`` of the arrays a method holds while
it updates, taken from the arrays themselves (:func:`.common.array_bytes`): batch = the stored bag
of weight samples (+ the data samples / input minibatch, working statistics and parameters);
online = one minibatch of weight samples (+ its data samples / inputs, statistics and parameters).
The chain's own state and the evaluation are not counted. **Skill** (columns ``*_skill``, ``skill`` the
lowest): each distance against that of the best constant prediction, a constant p(y = 1 | x) for the
logistic regression (:func:`.logreg.constant_distances`) and the constant density on the grid for the
mixture (:func:`.mog.constant_density`); a student counts only where it beats it. All randomness comes from ``seed``;
results are deterministic. Tables are tidy: one row per (toy, configuration, method), config
columns first.

These are not baselines of the engine (they use neither its chains nor its students): the package
depends on :mod:`gped_kit.core` only. It is the numerics only: :func:`run_mog` and
:func:`run_logreg` return a :class:`ToyResult` in memory. Stored runs, profiles and the analysis of
the tables are in :mod:`gped_kit.experiments.thesis`, the figures in :mod:`gped_kit.experiments.thesis.figures`.
"""

from .common import MODES, ToyResult, array_bytes, config_dict, linear_decay
from .logreg import (
    INPUT_GENERATORS,
    LOGREG_PRIOR_VARIANCE,
    LOSSES,
    LogRegConfig,
    constant_distances,
    logreg_dataset,
    logreg_log_posterior,
    logreg_posterior_quadrature,
    run_logreg,
    sigmoid_mixture_log_outputs,
    slice_sampler,
)
from .mog import (
    MOG_PRIOR_VARIANCE,
    MOG_TRUE_MEANS,
    MOG_VARIANCES,
    MOG_WEIGHTS,
    VARIANCE_FLOOR,
    MoGConfig,
    MoGParams,
    OnlineEM,
    batch_em,
    constant_density,
    grid_kl_tv,
    mog_dataset,
    mog_exact_posterior,
    mog_exact_predictive_pdf,
    mog_gibbs,
    mog_init,
    mog_params_from_statistics,
    mog_predictive_pdf,
    mog_responsibilities,
    mog_statistics,
    run_mog,
    sample_mog_likelihood,
    sample_mog_predictive,
)

__all__ = [
    "MODES", "ToyResult", "array_bytes", "config_dict", "linear_decay",
    "INPUT_GENERATORS", "LOGREG_PRIOR_VARIANCE", "LOSSES", "LogRegConfig", "constant_distances", "logreg_dataset",
    "logreg_log_posterior", "logreg_posterior_quadrature", "run_logreg", "sigmoid_mixture_log_outputs", "slice_sampler",
    "MOG_PRIOR_VARIANCE", "MOG_TRUE_MEANS", "MOG_VARIANCES", "MOG_WEIGHTS", "VARIANCE_FLOOR", "MoGConfig",
    "MoGParams", "OnlineEM", "batch_em", "constant_density", "grid_kl_tv", "mog_dataset", "mog_exact_posterior",
    "mog_exact_predictive_pdf", "mog_gibbs", "mog_init", "mog_params_from_statistics", "mog_predictive_pdf",
    "mog_responsibilities", "mog_statistics", "run_mog", "sample_mog_likelihood", "sample_mog_predictive",
]

"""gped-kit: Generalized Bayesian Posterior Expectation Distillation (Vadera, Jalaian, Marlin).

The public API, for a chain of your own::

    import gped_kit as gk

    data = gk.GPEDData.from_tensors(train=(x, y), test=(x_test, y_test))
    config = gk.GPEDConfig(model="fcnn", sampler=gk.sampler_config("sgld", step_size=4e-6, prior_precision=10),
                           num_iterations=20_000, burn_in=1_000)
    result = gk.distill(data, config, [gk.StudentConfig("predictive", "U_s", thinning=100),
                                       gk.StudentConfig("entropy", "U_o", thinning=10)])
    model = result.model(result.labels[0])      # predict(x): probabilities, total / data / knowledge
    model.save("student.pt"); gk.load_model("student.pt")

Packages by role; dependencies point one way (each imports only from those above it):

* :mod:`gped_kit.core`        -- pure numerics: SGLD (Eq. 7) and the other SG-MCMC samplers, Adam,
  likelihoods, targets g, estimators U_s / U_o (Eqs. 9-10), losses (Eqs. 8, 11), metrics, uncertainty
  decomposition, option enums and validation, config records
* :mod:`gped_kit.models`      -- the paper's networks as presets, any ``nn.Module`` from a specification,
  pruning, cost (parameters, FLOPs, latency)
* :mod:`gped_kit.data`        -- data sets under one root, OOD sets, the paper's manipulations, the
  engine's data container for any tensors or datasets
* :mod:`gped_kit.toys`        -- the toy posteriors of Papamakarios' thesis (depends on core only)
* :mod:`gped_kit.engine`      -- Algorithm 1 as state and step functions, one chain or a vmapped batch,
  checkpoints
* :mod:`gped_kit.baselines`   -- EnD2 and Hydra on the engine's chains
* :mod:`gped_kit.experiments` -- the results store, profiles and settings, the paper's settings and
  tables, one module (or package) per experiment, the registry of the notebooks
* :mod:`gped_kit.viz`         -- figures and explorers
* :mod:`gped_kit.cli`         -- the headless notebook runner (``python -m gped_kit.cli.batch``)

This module imports only what :data:`__all__` names, from ``core``, ``models``, ``data``,
``engine`` and the results store (none of which imports this module's names), so importing
``gped_kit`` keeps the layering.
"""

from .core.baoa import BAOAConfig
from .core.samplers import sampler_config
from .core.sghmc import SGHMCConfig
from .core.sgld import SGLDConfig
from .core.sgnht import SGNHTConfig
from .core.targets import Target, custom_target
from .data.container import GPEDData
from .data.experiment import DataConfig, prepare_data
from .engine import (
    DistilledModel,
    GPEDConfig,
    GPEDResult,
    Prediction,
    StudentConfig,
    distill,
    distill_many,
    distill_samples,
    load_model,
    resolve_device,
)
from .experiments.store import ResultsStore
from .models.presets import ArchSpec

__version__ = "0.2.0"

__all__ = [
    "__version__",
    # Algorithm 1
    "distill", "distill_many", "distill_samples", "GPEDConfig", "StudentConfig", "GPEDResult", "resolve_device",
    # a distilled student as a model
    "DistilledModel", "Prediction", "load_model",
    # data and models
    "GPEDData", "DataConfig", "prepare_data", "ArchSpec",
    # the teacher's sampler
    "sampler_config", "SGLDConfig", "SGHMCConfig", "SGNHTConfig", "BAOAConfig",
    # what a student distils
    "Target", "custom_target",
    # stored results
    "ResultsStore",
]

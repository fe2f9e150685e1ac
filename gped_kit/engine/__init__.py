"""The GPED engine: Algorithm 1 as explicit state and step functions, one chain or many.

* :mod:`~gped_kit.engine.config` -- :class:`GPEDConfig` (teacher chain, loop) and :class:`StudentConfig`;
* :mod:`~gped_kit.engine.spec` -- a chain made concrete: networks, initial values, groups;
* :mod:`~gped_kit.engine.state` -- the typed state: :class:`EngineState` and its parts (chain axis first);
* :mod:`~gped_kit.engine.layout` -- independent chains or a pooled teacher, as data chosen once;
* :mod:`~gped_kit.engine.setup` -- what an engine fixes when built, and the event schedule;
* :mod:`~gped_kit.engine.steps` -- ``teacher_gradients``, ``distill_gradients``, ``ensemble_step``;
* :mod:`~gped_kit.engine.streams` -- per-chain random generators;
* :mod:`~gped_kit.engine.values` / :mod:`~gped_kit.engine.graphs` -- device-side per-step values, CUDA graphs;
* :mod:`~gped_kit.engine.engine` -- ``init`` / ``step`` (Algorithm 1's iteration) and :class:`GPEDEngine`;
* :mod:`~gped_kit.engine.distill` -- a distillation group's update of its students;
* :mod:`~gped_kit.engine.loop` -- the run loop (log and checkpoint points, graph mode);
* :mod:`~gped_kit.engine.evaluate` -- history rows, metrics, results;
* :mod:`~gped_kit.engine.resume` / :mod:`~gped_kit.engine.checkpoint` -- a run's state, per-run checkpoints,
  bit-identical resume;
* :mod:`~gped_kit.engine.run` -- :func:`distill` / :func:`distill_many`;
* :mod:`~gped_kit.engine.offline` -- :func:`distill_samples`: a teacher given as samples (an ensemble, a posterior);
* :mod:`~gped_kit.engine.distilled` -- a student as a model: predict with uncertainty, save, :func:`load_model`.

Quick use::

    from gped_kit.engine import GPEDConfig, StudentConfig, distill
    result = distill(data, GPEDConfig(model="fcnn", num_iterations=5_000, burn_in=1_000),
                     [StudentConfig("predictive", "U_s", thinning=2)])
    result.summary
"""

from .config import (
           GPEDConfig,
           StudentConfig,
           resolve_device,
           snapshot_steps,
           student_lr,
           student_updates,
)
from .distilled import DistilledModel, Prediction
from .distilled import load as load_model
from .engine import GPEDEngine
from .layout import check_batchable
from .offline import OfflineEngine, distill_samples
from .result import GPEDResult
from .run import distill, distill_many

__all__ = ["GPEDConfig", "StudentConfig", "GPEDEngine", "GPEDResult", "DistilledModel", "Prediction", "check_batchable",
           "distill", "distill_many", "distill_samples", "OfflineEngine", "load_model", "resolve_device",
           "snapshot_steps", "student_lr", "student_updates"]

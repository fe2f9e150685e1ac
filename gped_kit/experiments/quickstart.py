"""The quickstart (notebook 00): one FCNN chain on MNIST with a predictive and an entropy student.

:func:`quickstart_task` builds that chain from a profile's chain settings (:data:`PROFILES`) and the
notebook's data, teacher and student parameters (Table 1's setting by default: all 60,000 MNIST
digits, the paper's SGLD, a predictive U_s student and an expected-entropy U_o student); notebook 00
and the paper-profile benchmark both run it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.sgld import SGLDConfig
from ..data.experiment import DataConfig
from ..engine import GPEDConfig, StudentConfig
from ..models.presets import ArchSpec
from .artifacts import Artifact, Kind, declare
from .chains import ChainTask
from .checks import Check, Role, declare_checks
from .frame import SCALED_CHAIN, Experiment
from .paper import ChainSettings, paper_model


@dataclass(frozen=True)
class QuickstartSettings(ChainSettings):
    """The quickstart's chain (see :class:`~gped_kit.experiments.paper.ChainSettings`)."""


PROFILES: dict[str, QuickstartSettings] = {
    # CPU, about a minute: a short chain, students updated every 2 teacher steps so that they see
    # enough minibatches in 5,000 iterations.
    "default": QuickstartSettings(num_iterations=5_000, burn_in=1_000, predictive_thinning=2, entropy_thinning=2,
                                  eval_thinning=100, log_every=500, checkpoint_every=1_000),
    # Appendix A.2: T = 10^6, B = 1,000, H = 100 (predictive) / 10 (entropy).
    "paper": QuickstartSettings(num_iterations=1_000_000, burn_in=1_000, predictive_thinning=100, entropy_thinning=10,
                                eval_thinning=100, log_every=10_000, checkpoint_every=50_000),
}

#: The students' labels in the quickstart's tables.
PREDICTIVE_LABEL = "predictive (U_s)"
ENTROPY_LABEL = "expected entropy (U_o)"


def quickstart_task(settings: QuickstartSettings, *, dataset: str = "mnist", model: str = "fcnn",
                    labelled_size: int | None = None, mask_size: int = 0, step_size: float = 4e-6,
                    prior_precision: float = 10.0, batch_size: int = 100, student_dropout: float = 0.5,
                    seed: int = 0, device: str = "auto", data_root: str | None = None,
                    keep_outputs: tuple[str, ...] = ("test",)) -> ChainTask:
    """Notebook 00's chain: ``model``'s teacher on ``dataset`` (labelled set of ``labelled_size``, None
    = all; masks of ``mask_size``) sampled by SGLD (Eq. 7: ``step_size`` eta, ``prior_precision`` tau,
    minibatch ``batch_size`` M) for the profile's T, B (None: the paper's for ``model``), evaluation and
    logging, with a predictive U_s student (H = ``settings.predictive_thinning``; the teacher's
    architecture, dropout ``student_dropout`` for the FCNN, Appendix A.2) and an expected-entropy U_o
    student (H = ``settings.entropy_thinning``), both with M' = M. ``keep_outputs`` names the evaluation sets
    whose outputs the stored result keeps (the notebook's figures use the test set's)."""
    burn_in = paper_model(model).burn_in if settings.burn_in is None else settings.burn_in
    config = GPEDConfig(model=model,
                        sampler=SGLDConfig(step_size=step_size, prior_precision=prior_precision, batch_size=batch_size),
                        num_iterations=settings.num_iterations, burn_in=burn_in,
                        eval_thinning=settings.eval_thinning, log_every=settings.log_every,
                        checkpoint_every=settings.checkpoint_every, seed=seed, device=device)
    students = (
        StudentConfig(target="predictive", estimator="U_s", thinning=settings.predictive_thinning,
                      batch_size=batch_size, arch=ArchSpec(model, dropout=student_dropout if model == "fcnn" else 0.0),
                      name=PREDICTIVE_LABEL),
        StudentConfig(target="entropy", estimator="U_o", thinning=settings.entropy_thinning, batch_size=batch_size,
                      name=ENTROPY_LABEL),
    )
    data = DataConfig(dataset, labelled_size=labelled_size, mask_size=mask_size, seed=seed, root=data_root,
                      test_size=settings.test_size)
    return ChainTask(data, config, students, keep_outputs=keep_outputs)


def _tasks(settings: QuickstartSettings, *, seed: int, device: str, data_root: str | None, dataset: str,
           model: str, labelled_size: int | None, mask_size: int, step_size: float, prior_precision: float,
           batch_size: int, student_dropout: float) -> list[ChainTask]:
    return [quickstart_task(settings, dataset=dataset, model=model, labelled_size=labelled_size, mask_size=mask_size,
                            step_size=step_size, prior_precision=prior_precision, batch_size=batch_size,
                            student_dropout=student_dropout, seed=seed, device=device, data_root=data_root)]


#: What notebook 00 writes to ``figures/`` (:mod:`gped_kit.experiments.artifacts`).
ARTIFACTS = declare(
    Artifact("table", Kind.TABLE, "00_quickstart_{profile}_table",
             "The quickstart's teacher ensemble and students on the test set, beside Table 1's row ({profile} profile)",
             "the quickstart chain (store kind chain)"),
    Artifact("curves", Kind.FIGURE, "00_quickstart_{profile}_curves",
             "The quickstart's test NLL, accuracy and expected-entropy MAE over the steps, Table 1's values dashed "
             "({profile} profile)",
             "the quickstart chain (store kind chain)"),
    Artifact("entropy", Kind.FIGURE, "00_quickstart_{profile}_entropy",
             "The quickstart's expected-entropy student against the teacher ensemble, per test input ({profile} "
             "profile)", "the quickstart chain (store kind chain)"),
)

#: What notebook 00 tests on its results (:mod:`gped_kit.experiments.checks`): findings of its one short chain.
CHECKS = declare_checks(
    Check("teacher_accuracy", "teacher accuracy >= 0.95", Role.FINDING),
    Check("student_close", "student accuracy at most 3 points below the teacher's", Role.FINDING),
    Check("entropy_skill", "entropy student's skill over the best constant >= 0.05", Role.FINDING),
)


EXPERIMENT = Experiment(
    "00_quickstart", PROFILES, _tasks, artifacts=ARTIFACTS, checks=CHECKS,
    description="one FCNN chain on MNIST feeding a predictive (U_s) and an expected-entropy (U_o) student",
    parameters={"dataset": "mnist", "model": "fcnn", "labelled_size": None, "mask_size": 0, "step_size": 4e-6,
                "prior_precision": 10.0, "batch_size": 100, "student_dropout": 0.5},
    scaled_paper=SCALED_CHAIN)

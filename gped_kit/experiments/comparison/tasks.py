"""The comparison's chains: its students (KD, GPED, EnD2 and their variants, :func:`comparison_students`),
the MNIST chain (:func:`comparison_task`) and the spiral toy's (:func:`spiral_task`)."""

from __future__ import annotations

import dataclasses

from ...baselines.endd import ENDD
from ...core.sgld import SGLDConfig
from ...core.targets import predictive_entropy_target
from ...data.experiment import DataConfig
from ...data.ood import ood_available
from ...engine import GPEDConfig, StudentConfig
from ...models.presets import ArchSpec
from ..chains import ChainTask
from ..paper import paper_model, teacher_config
from .settings import COMPARISON_OOD_SETS, COMPARISON_SHIFT_SETS, ComparisonSettings


def comparison_students(model: str, settings: ComparisonSettings, variants: bool = True
                        ) -> tuple[StudentConfig, ...]:
    """KD (U_s: Bayesian Dark Knowledge), GPED (C+1, U_s on the predictive, U_o on the entropy, whose
    entropy column uses ``settings.gped_entropy_loss``), EnD2 (U_s) and, with ``variants``: GPED with
    the other entropy loss, GPED updated every step (H = 1: twice the distillation steps), and KD
    students with the thesis' input generators (``perturb`` with ``perturb_std``, ``noise``) and with
    derivative matching (``derivative_weight``); all others are updated every ``settings.thinning``
    steps, with the paper's student dropout and lr schedule for ``model``.

    Why the GPED variants: the entropy column's targets (U_o running means of the samples' entropies,
    with few visits per input in a short chain) are right-skewed, and the paper's absolute error is
    minimised by their median, not their mean, so E[H] comes out low and the knowledge uncertainty
    (total - E[H]) high; the squared error's minimiser is the mean."""
    paper = paper_model(model)
    arch = ArchSpec(model, dropout=paper.student_dropout)
    common = dict(thinning=settings.thinning, lr_halving_epochs=paper.lr_halving_epochs)
    main = predictive_entropy_target(settings.gped_entropy_loss)
    other = predictive_entropy_target("squared" if settings.gped_entropy_loss == "absolute" else "absolute")
    students = [StudentConfig("predictive", "U_s", arch=arch, name="KD", **common),
                StudentConfig(main, "U_s+U_o", arch=arch, name="GPED", **common),
                StudentConfig(ENDD, "U_s", arch=ArchSpec(model, dropout=paper.endd_dropout), name="EnD2", **common)]
    if variants:
        other_name = "GPED (squared error)" if settings.gped_entropy_loss == "absolute" else "GPED (absolute error)"
        students += [
            StudentConfig(other, "U_s+U_o", arch=arch, name=other_name, **common),
            StudentConfig(main, "U_s+U_o", arch=arch, name="GPED (every step)",
                          **{**common, "thinning": 1})]
        students += [
            StudentConfig("predictive", "U_s", arch=arch, name="KD (perturbed inputs)", input_generator="perturb",
                          input_noise_std=settings.perturb_std, **common),
            StudentConfig("predictive", "U_s", arch=arch, name="KD (noise inputs)", input_generator="noise", **common),
            StudentConfig("predictive", "U_s", arch=arch, name="KD + derivative matching",
                          derivative_weight=settings.derivative_weight, **common)]
    return tuple(students)


def comparison_task(settings: ComparisonSettings, seed: int = 0, device: str = "auto", data_root: str | None = None,
                    verify_checksums: bool = True) -> ChainTask:
    """The MNIST comparison chain: ``settings.model``'s teacher (Appendix A.2) with ``num_snapshots``
    kept samples, the students of :func:`comparison_students`, and the shift / OOD sets evaluated online."""
    ood = COMPARISON_SHIFT_SETS + tuple(n for n in COMPARISON_OOD_SETS if ood_available(n, data_root))
    data = DataConfig("mnist", labelled_size=settings.labelled_size, mask_size=settings.mask_size, seed=seed,
                      root=data_root, verify_checksums=verify_checksums, ood_datasets=ood, test_size=settings.test_size)
    config = teacher_config(settings.model, settings.labelled_size, settings, seed, device,
                            num_snapshots=settings.num_snapshots)
    return ChainTask(data, config, comparison_students(settings.model, settings))



def spiral_task(settings: ComparisonSettings, seed: int = 0, device: str = "auto") -> ChainTask:
    """The spiral toy's chain (``settings.spiral``, :class:`SpiralSettings`; 2-D feature vectors): an
    FCNN teacher (2-400-400-2; prior precision 1) with ``spiral.num_snapshots`` kept samples, KD / GPED /
    EnD2 students (the teacher's architecture without dropout, constant learning rate, H =
    ``spiral.thinning``) and the grid as an evaluation set for uncertainty maps."""
    spiral = settings.spiral
    config = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=spiral.step_size, prior_precision=1.0,
                                                         batch_size=100),
                        num_iterations=spiral.num_iterations, burn_in=spiral.burn_in, eval_thinning=10,
                        log_every=max(spiral.num_iterations // 10, 1),
                        checkpoint_every=spiral.num_iterations, seed=seed, device=device,
                        num_snapshots=spiral.num_snapshots)
    students = tuple(dataclasses.replace(s, thinning=spiral.thinning, lr_halving_epochs=None,
                                         arch=ArchSpec("fcnn"))
                     for s in comparison_students("fcnn", settings, variants=False))
    return ChainTask(dataclasses.replace(spiral.data, seed=seed), config, students, name=f"spiral seed={seed}")

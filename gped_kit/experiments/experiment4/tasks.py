"""Experiment 4's chains: the eight students of one chain and its task on the Experiment 3 setting,
with the OOD sets evaluated beside the test set (:func:`experiment4_task`, :func:`experiment4_tasks`)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ...baselines.endd import ENDD
from ...core.targets import PREDICTIVE_ENTROPY
from ...data.experiment import DataConfig
from ...data.ood import OOD_SETS, ood_available
from ...engine import StudentConfig
from ...models.presets import ArchSpec
from ..chains import ChainTask
from ..paper import paper_model, teacher_config
from .settings import OOD_FOR, STUDENT_SIZES, Experiment4Settings


def ood_availability(dataset: str, data_root: str | None = None) -> pd.DataFrame:
    """Which of the OOD sets for ``dataset`` are present under the data root, and how to get the others."""
    if dataset not in OOD_FOR:
        raise ValueError(f"dataset={dataset!r} is not known; allowed: {sorted(OOD_FOR)}")
    return pd.DataFrame([{"ood_dataset": name, "available": ood_available(name, data_root),
                          "how to get it": OOD_SETS[name].source} for name in OOD_FOR[dataset]])


def experiment4_students(model: str, settings: Experiment4Settings) -> tuple[StudentConfig, ...]:
    """The eight students of one chain, named ``<method>-<estimator>-<size>`` with the paper's labels:
    GPED C+1 (``predictive+entropy``; its "U_s" student runs ``U_s+U_o``, U_o on the entropy column)
    and EnD2 (:data:`~gped_kit.baselines.endd.ENDD`), with U_s and U_o, for the base and the largest
    width multiplier (Appendix A.4), with the dropout of :meth:`Experiment4Settings.student_dropout`."""
    paper = paper_model(model)
    k1, k2 = settings.largest(model)
    gped_dropout, endd_dropout = settings.student_dropout(model, endd=False), settings.student_dropout(model, endd=True)
    students = []
    for size, (a, b) in zip(STUDENT_SIZES, ((1.0, 1.0), (k1, k2))):
        for estimator, engine_estimator in (("U_s", "U_s+U_o"), ("U_o", "U_o")):
            students.append(StudentConfig(
                PREDICTIVE_ENTROPY, engine_estimator, arch=ArchSpec(model, a, b, dropout=gped_dropout),
                thinning=settings.thinning, lr_halving_epochs=paper.lr_halving_epochs,
                name=f"GPED-{estimator}-{size}"))
            students.append(StudentConfig(
                ENDD, estimator, arch=ArchSpec(model, a, b, dropout=endd_dropout),
                thinning=settings.thinning, lr_halving_epochs=paper.lr_halving_epochs,
                name=f"EnD2-{estimator}-{size}"))
    return tuple(students)


def experiment4_task(model: str, settings: Experiment4Settings, seed: int = 0, device: str = "auto",
                     data_root: str | None = None, verify_checksums: bool = True) -> ChainTask:
    """One Experiment 4 chain: ``model``'s teacher (Appendix A.2) on the Experiment 3 setting, feeding
    the students of :func:`experiment4_students`, with every available OOD set of :data:`OOD_FOR`
    evaluated beside the test set, masked like it, whole, or both (``settings.ood_masking``)."""
    paper = paper_model(model)
    mnist = paper.dataset == "mnist"
    n = settings.labelled_size if mnist else settings.cifar_labelled_size
    ood = tuple(name for name in OOD_FOR[paper.dataset] if ood_available(name, data_root))
    data = DataConfig(paper.dataset, labelled_size=n, mask_size=settings.mask_size if mnist else 0, seed=seed,
                      root=data_root, verify_checksums=verify_checksums, ood_datasets=ood, ood_size=settings.ood_size,
                      ood_masking=settings.ood_masking, test_size=settings.test_size)
    return ChainTask(data, teacher_config(model, n, settings, seed, device), experiment4_students(model, settings))


def experiment4_tasks(models: Sequence[str], settings: Experiment4Settings, device: str = "auto",
                      data_root: str | None = None, verify_checksums: bool = True, seed: int = 0) -> list[ChainTask]:
    """Every Experiment 4 chain of a profile: :func:`experiment4_task` for each seed of
    ``settings.seeds`` (offset by ``seed``) and each of ``models``, seeds outermost. With the default
    ``seeds=(0,)`` these are the tasks of one chain per model."""
    return [experiment4_task(model, settings, seed + s, device, data_root, verify_checksums)
            for s in settings.seeds for model in models]

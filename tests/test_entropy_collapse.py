"""The expected-entropy student's collapse under the paper's recipe, and the warm-up that prevents it (issue 52).

The paper's entropy student has an exp head trained on the absolute error with Adam at alpha_0 = 1e-3 from its
first update. When its teacher is already sharp (most target entropies near 0, a few large: median about 0.01,
mean about 0.1, as in the kit's short CPU profiles, where the student starts after a long burn-in), Adam's first
updates move every weight of the last layers by about alpha_0 in the one direction that lowers all outputs, with
momentum: the raw output runs far below log(0.01), the outputs fall to ~1e-10, and the gradients, proportional
to the output, fall below Adam's epsilon. The student then predicts 0 everywhere for good: its entropy MAE is
the targets' mean and its skill over the best constant is about 0 (what four default-profile FCNN chains
stored). ``StudentConfig.lr_warmup`` raises the rate over the first updates and the student learns.

Reproduced here with the engine's own code (:func:`~gped_kit.engine.offline.distill_samples`: one fixed MNIST
teacher replayed, so the targets are the same for both students), in seconds: remove the warm-up from
``student_lr`` and the second test fails.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.targets import SKILL_FLOOR, SkillWarning
from gped_kit.data.experiment import DataConfig, prepare_data
from gped_kit.engine import GPEDConfig, StudentConfig
from gped_kit.engine.offline import distill_samples
from gped_kit.models.presets import ArchSpec, build_network

UPDATES = 500


@pytest.fixture(scope="module")
def collapse_runs():
    """One sharp MNIST teacher (median test entropy about 0.01) distilled into two expected-entropy students
    of the paper's FCNN (dropout 0.5, Adam 1e-3, absolute error, U_s): the recipe as written and with a warm-up
    of 100 updates; their outputs on the test set and the run's summary."""
    data = prepare_data(DataConfig("mnist", labelled_size=10_000, test_size=2_000))
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    teacher = build_network(ArchSpec("fcnn"), tuple(data.train_x.shape[1:]), 10)
    opt = torch.optim.Adam(teacher.parameters(), lr=1e-3)
    for _ in range(600):
        idx = torch.randint(len(data.train_x), (100,), generator=gen)
        loss = F.cross_entropy(teacher(data.train_x[idx]), data.train_y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    teacher.eval()
    config = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=1e-6), num_iterations=2, burn_in=0,
                        eval_thinning=1, log_every=UPDATES, checkpoint_every=UPDATES, progress=False, device="cpu")
    students = [StudentConfig("entropy", "U_s", arch=ArchSpec("fcnn", dropout=0.5), thinning=1, lr_warmup=warmup,
                              name=name) for name, warmup in (("paper", 0), ("warm-up", 100))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SkillWarning)
        result = distill_samples([teacher], data, config, students, passes=UPDATES)
    with torch.no_grad():
        entropy = torch.special.entr(F.softmax(teacher(data.test_x), -1)).sum(-1)
        outputs = {name: result.model(name).predict(data.test_x).output[:, 0] for name in ("paper", "warm-up")}
    return entropy, outputs, result.summary.set_index("student")


def test_the_teacher_is_sharp_as_in_the_short_profiles(collapse_runs):
    entropy, _, _ = collapse_runs
    assert 0.003 < float(entropy.median()) < 0.05 and 0.05 < float(entropy.mean()) < 0.2


def test_the_recipe_as_written_collapses_and_the_warm_up_learns(collapse_runs):
    entropy, outputs, summary = collapse_runs
    paper, warm = outputs["paper"], outputs["warm-up"]
    # the recipe as written: outputs ~0 everywhere, its error that of predicting 0, no skill
    assert float(paper.median()) < 1e-6
    assert summary.loc["paper", "entropy_mae"] == pytest.approx(summary.loc["paper", "entropy_mae_zero"], rel=1e-3)
    assert summary.loc["paper", "entropy_mae_skill"] < SKILL_FLOOR
    # warmed up: outputs on the targets' scale, below the best constant's error
    assert 1e-4 < float(warm.median()) < 0.1
    assert summary.loc["warm-up", "entropy_mae_skill"] > SKILL_FLOOR

"""Distilling a teacher given as samples (gped_kit.engine.offline): the online chain's own samples replayed
give the online run's numbers; a deep ensemble distilled into one student; bad samples rejected."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from gped_kit.core.sgld import SGLDConfig
from gped_kit.data.container import GPEDData
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig, distill_samples
from gped_kit.engine.offline import offline_engine
from gped_kit.engine.run import run_engine
from gped_kit.engine.spec import build_chain
from gped_kit.engine.state import flat


def small_net(out_dim: int) -> nn.Module:
    """A teacher and student small enough for seconds on a CPU (8x8 digits in, no buffers, no dropout)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, out_dim))


def config(**kw) -> GPEDConfig:
    base = dict(model=small_net, sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=40, burn_in=9,
                eval_thinning=3, log_every=10, progress=False, device="cpu", seed=3)
    base.update(kw)
    return GPEDConfig(**base)


# Two groups of H = 2 (M' = 40: a U_o and a U_s student sharing S'), one of H = 3 and one of H = 1; the first
# student's rate halves every 12 steps (N = 1200, M = 50: an epoch is 24 steps), so the schedule is compared too.
STUDENTS = [StudentConfig("predictive", "U_o", thinning=2, batch_size=40, lr_halving_epochs=0.5),
            StudentConfig("predictive", "U_s", thinning=2, batch_size=40, name="predictive-U_s"),
            StudentConfig("entropy", "U_o", thinning=3, batch_size=30),
            StudentConfig("predictive+entropy", "U_s+U_o", thinning=1, batch_size=25)]


class Recorder(GPEDEngine):
    """The online engine, keeping a copy of the teacher after every step t > B: the sample that step t's
    events (ensemble, distillation) use."""

    def __init__(self, data: GPEDData, cfg: GPEDConfig, students: list[StudentConfig]) -> None:
        super().__init__([build_chain(data, cfg, students)])
        self.samples: list[dict[str, torch.Tensor]] = []

    def teacher_step(self, t: int | None = None) -> None:
        t = self.t if t is None else t
        super().teacher_step(t)
        if t > self.config.burn_in:
            values = {**self.chain.params, **self.chain.buffers}
            self.samples.append({name: v[0].clone() for name, v in values.items()})


@pytest.fixture(scope="module")
def online(digits_data):
    engine = Recorder(digits_data, config(), STUDENTS)
    return engine, run_engine(engine)[0]


def test_replaying_the_chains_samples_gives_the_online_u_o_estimates_and_students(online, digits_data):
    # Exact equality (torch.equal), not a tolerance: offline, the teacher's parameters are the online values
    # copied, S' comes from the same group streams (same seed, same groups) and every later operation is the
    # same engine code on the same values in the same order on the CPU, whose kernels are deterministic.
    on, on_result = online
    assert len(on.samples) == 40 - 9 - 1  # steps t = 10 .. 39
    off = offline_engine(on.samples, digits_data, config(), STUDENTS)
    assert off.config.num_iterations == 40 and [off.sample_index(t) for t in (9, 10, 39)] == [None, 0, 29]
    off_result = run_engine(off)[0]
    for j, s in enumerate(STUDENTS):
        a, b = on.students[j], off.students[j]
        assert torch.equal(a.store.sums, b.store.sums) and torch.equal(a.store.counts, b.store.counts), s.label
        assert torch.equal(flat(a.params), flat(b.params)), s.label
        assert torch.equal(flat(a.adam.exp_avg_sq), flat(b.adam.exp_avg_sq)) and torch.equal(a.lr, b.lr), s.label
    assert on.adam_steps == off.adam_steps == [15, 15, 10, 30]  # t = 10 .. 39: multiples of H
    assert int(on.students[0].store.counts.sum()) == 15 * 40  # every visit of an input counted
    assert float(off.students[0].lr[0]) == pytest.approx(1e-3 * 0.5 ** ((38 - 9) // 12))  # the halving ran
    for j, label in enumerate(on_result.labels):
        if on_result.stores[j] is not None:
            (iv, ev), (jv, fv) = on_result.stores[j], off_result.stores[j]
            assert torch.equal(iv, jv) and torch.equal(ev, fv) and len(iv) > 0
        assert torch.equal(on_result.student_outputs["test"][label], off_result.student_outputs["test"][label])
    for name, value in on_result.teacher_outputs["test"].items():
        assert torch.equal(value, off_result.teacher_outputs["test"][name])
    # the history is the online one but for the teacher's minibatch NLL (no minibatch offline) and the clock
    drop = ["teacher_train_nll", "elapsed_s"]
    pd.testing.assert_frame_equal(on_result.history.drop(columns=drop), off_result.history.drop(columns=drop))
    assert off_result.history["teacher_train_nll"].isna().all()
    assert (off_result.summary["offline_samples"] == 30).all() and (off_result.summary["offline_passes"] == 1).all()

    # the public entry point, and the same samples as flattened parameter vectors (S, P), give the same run
    for samples in (on.samples, torch.stack([flat(s, chain_axis=False) for s in on.samples])):
        again = distill_samples(samples, digits_data, config(), STUDENTS)
        for j in range(len(STUDENTS)):
            assert all(torch.equal(again.student_params[j][n], v) for n, v in off_result.student_params[j].items())
            if off_result.stores[j] is not None:
                assert torch.equal(again.stores[j][1], off_result.stores[j][1])


def trained_member(seed: int, data: GPEDData) -> nn.Module:
    """One member of a deep ensemble: its own initialisation and minibatches, 60 Adam steps."""
    torch.manual_seed(seed)
    net = small_net(10)
    optimiser = torch.optim.Adam(net.parameters(), lr=1e-2)
    draws = torch.Generator().manual_seed(seed)
    for _ in range(60):
        idx = torch.randint(len(data.train_y), (100,), generator=draws)
        optimiser.zero_grad()
        F.cross_entropy(net(data.train_x[idx]), data.train_y[idx]).backward()
        optimiser.step()
    return net.eval()


def test_a_deep_ensemble_distilled_into_one_student_matches_its_average(digits_data):
    members = [trained_member(seed, digits_data) for seed in range(5)]
    x = digits_data.test_x
    with torch.no_grad():
        average = torch.stack([F.softmax(m(x), -1) for m in members]).mean(0)
        torch.manual_seed(123)
        untrained = F.softmax(small_net(10)(x), -1)
    student = StudentConfig("predictive", "U_o", thinning=1, batch_size=100, lr=1e-2, lr_halving_epochs=None)
    cfg = config(burn_in=0, eval_thinning=1, log_every=1_000)
    result = distill_samples(members, digits_data, cfg, [student], passes=40)
    # the teacher ensemble is the members' average: each member added 40 times (eval_thinning=1); to float32
    # round-off, as the running sum of 200 terms rounds differently from a mean of 5 (about 1e-6 relative)
    torch.testing.assert_close(result.teacher_outputs["test"]["predictive"], average, rtol=1e-5, atol=1e-6)
    assert result.steps_done == 1 + 5 * 40 and int(result.summary["teacher_samples"].iloc[0]) == 200
    # known answer: the student's predictive is the members' average, far closer than an untrained network
    # of its architecture (about 1.4 in mean L1 distance) and than any single member (about 0.17); 0.05 here
    learned = result.student_outputs["test"][student.label]

    def distance(probs: torch.Tensor) -> float:
        return float((probs - average).abs().sum(-1).mean())

    with torch.no_grad():
        closest_member = min(distance(F.softmax(m(x), -1)) for m in members)
    assert distance(learned) < 0.1 * distance(untrained) and distance(learned) < 0.5 * closest_member
    assert float((learned.argmax(-1) == average.argmax(-1)).float().mean()) > 0.95


def test_bad_samples_are_rejected_with_what_was_expected(online, digits_data):
    samples = online[0].samples[:4]
    wrong_shape = dict(samples[1], **{"1.weight": torch.zeros(16, 65)})
    non_finite = dict(samples[2], **{"3.bias": torch.full((10,), float("nan"))})
    cases = [([], "no sample given"),
             (samples[0], "one dict given; pass a list"),
             ("weights.pt", "a str; allowed: a list of state dicts"),
             ([samples[0], 3], r"samples\[1\] is a int; allowed: a state dict"),
             ([{k: v for k, v in samples[0].items() if k != "3.bias"}], r"samples\[0\] lacks \['3.bias'\]"),
             ([dict(samples[0], extra=torch.zeros(1))], r"has keys the teacher does not: \['extra'\]"),
             ([samples[0], wrong_shape], r"samples\[1\]\['1.weight'\] has shape \(16, 65\); the teacher's "
                                         r"'1.weight' has shape \(16, 64\)"),
             ([samples[0], samples[1], non_finite], r"samples\[2\]\['3.bias'\] holds 10 non-finite value"),
             ([nn.Sequential(nn.Flatten(), nn.Linear(64, 8), nn.ReLU(), nn.Linear(8, 10))],
              r"samples\[0\]\['1.weight'\] has shape \(8, 64\)"),
             (torch.zeros(3, 7), "a tensor of 7 columns; the teacher .* has P = 1210 parameters"),
             (torch.zeros(0, 1210), "a tensor of 0 rows"),
             (torch.zeros(1210), r"a tensor of shape \(1210,\)")]
    one = [StudentConfig("predictive", "U_o", thinning=1, batch_size=20)]  # an update at every visit
    for given, message in cases:
        with pytest.raises(ValueError, match=message):
            distill_samples(given, digits_data, config(eval_thinning=1), one)
    with pytest.raises(ValueError, match="passes=0: must be an integer >= 1"):
        distill_samples(samples, digits_data, config(), STUDENTS, passes=0)
    with pytest.raises(ValueError, match="thinning=100 .H. gives no update over the 4 visits"):
        distill_samples(samples, digits_data, config(), [StudentConfig()])
    with pytest.raises(ValueError, match="eval_thinning=100 adds no sample"):
        distill_samples(samples, digits_data, config(eval_thinning=100), STUDENTS)
    with pytest.raises(ValueError, match="num_chains=2"):
        distill_samples(samples, digits_data, config(num_chains=2), STUDENTS)
    with pytest.raises(ValueError, match="num_snapshots=2"):
        distill_samples(samples, digits_data, config(num_snapshots=2), STUDENTS)

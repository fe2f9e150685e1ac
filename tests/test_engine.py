"""Algorithm 1 end to end on real (8x8 digits) data: learning, invariants, resume, errors, and the engine's
steps against an independent plain-PyTorch loop of the paper's equations."""

import dataclasses
import math

import pandas as pd
import pytest
import torch
from conftest import make_digits_data
from torch.nn import functional as F

from gped_kit.baselines.endd import ENDD
from gped_kit.core.calibration import calibration, calibrations_from_table
from gped_kit.core.sgld import FUSED_MIN_ELEMENTS, SGLDConfig, fused_min_elements
from gped_kit.data.container import GPEDData
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig, distill, resolve_device, student_lr, student_updates
from gped_kit.engine.checkpoint import CheckpointError
from gped_kit.engine.engine import StepEvents
from gped_kit.engine.run import run_engine
from gped_kit.engine.spec import build_chain
from gped_kit.engine.state import flat
from gped_kit.models.presets import ArchSpec

SGLD = SGLDConfig(step_size=5e-5, batch_size=50)


def config(**kw):
    base = dict(model="fcnn", sampler=SGLD, num_iterations=400, burn_in=100, eval_thinning=10, log_every=100,
                checkpoint_every=100, progress=False, device="cpu")
    base.update(kw)
    return GPEDConfig(**base)


def engine(data, cfg, students):
    return GPEDEngine([build_chain(data, cfg, students)])


def teacher(e):
    return flat(e.chain.params)[0]


def student(e, j):
    return flat(e.students[j].params)[0]


@pytest.fixture(scope="module")
def trained(digits_data):
    students = [StudentConfig("predictive", "U_s", thinning=2),
                StudentConfig("entropy", "U_o", thinning=2),
                StudentConfig("predictive+entropy", "U_o", thinning=4, arch=ArchSpec("fcnn", 0.5, 0.5))]
    e = engine(digits_data, config(num_iterations=2000, burn_in=300, log_every=500), students)
    return e, run_engine(e)[0]


def test_teacher_and_students_learn_on_real_digits(trained):
    e, result = trained
    s = result.summary.set_index("student")
    assert result.finished and result.steps_done == 2000
    assert s.loc["predictive-U_s", "teacher_accuracy"] > 0.9
    assert s.loc["predictive-U_s", "student_accuracy"] > 0.85
    assert s.loc["predictive-U_s", "nll_gap"] < 0.3
    assert s.loc["entropy-U_o", "entropy_mae"] < 0.15
    assert s.loc["predictive+entropy-U_o-K0.5x0.5", "student_params"] < s.loc["predictive-U_s", "student_params"]
    # tidy: one row per student, config + metric columns, history one row per (log point, student)
    assert len(result.summary) == 3
    columns = {"dataset", "step_size", "estimator", "k1", "teacher_nll", "student_nll", "torch_version"}
    assert columns <= set(result.summary)
    assert len(result.history) == 4 * 3 and result.history["step"].max() == 2000
    assert result.teacher_outputs["test"]["predictive"].shape == (len(e.chains[0].data.test_y), 10)
    assert result.teacher_outputs["test"]["entropy"].shape == (len(e.chains[0].data.test_y), 1)
    # every predictive student's summary and history carry its expected calibration error, and the teacher's:
    # torchmetrics' number on the same test outputs (core.calibration); entropy-only students have none
    labels = e.chains[0].data.test_y
    assert s.loc["predictive-U_s", "student_ece"] == pytest.approx(
        calibration(result.student_outputs["test"]["predictive-U_s"], labels).ece, abs=1e-6)
    assert s.loc["predictive-U_s", "teacher_ece"] == pytest.approx(
        calibration(result.teacher_outputs["test"]["predictive"], labels).ece, abs=1e-6)
    assert 0 < s.loc["predictive-U_s", "student_ece"] < 0.2 and pd.isna(s.loc["entropy-U_o", "student_ece"])
    assert result.history["student_ece"].notna().any()
    # and the reliability diagrams' bins of the teacher and every classifying student, stored with each chain
    table = result.calibration_table()
    assert list(dict.fromkeys(table["network"])) == ["teacher", "predictive-U_s", "predictive+entropy-U_o-K0.5x0.5"]
    back = calibrations_from_table(table)
    assert back["predictive-U_s"].ece == pytest.approx(s.loc["predictive-U_s", "student_ece"], abs=1e-9)
    assert back["teacher"].binned_ece == pytest.approx(back["teacher"].ece, abs=1e-6)
    assert back["teacher"].num_bins == 15 and int(back["teacher"].bins["count"].sum()) == len(labels)


def test_u_o_store_counts_every_distillation_visit(trained):
    e, result = trained
    steps = len([t for t in range(2000) if t > 300 and t % 2 == 0])
    assert int(e.students[1].store.counts.sum()) == steps * 100
    assert e.ensemble_count == len([t for t in range(2000) if t > 300 and t % 10 == 0])
    visited, values = result.store("entropy-U_o")
    assert len(visited) == int((e.students[1].store.counts[0] > 0).sum()) and values.shape == (len(visited), 1)
    with pytest.raises(ValueError, match="no U_o student"):
        result.store("predictive-U_s")


def test_student_network_reproduces_the_reported_outputs(trained, digits_data):
    _, result = trained
    net = result.student_network("predictive-U_s")
    with torch.no_grad():
        probs = torch.softmax(net(digits_data.test_x), -1)
    torch.testing.assert_close(probs, result.student_outputs["test"]["predictive-U_s"], rtol=1e-4, atol=1e-5)


def test_teacher_chain_does_not_depend_on_attached_students(digits_data):
    alone = engine(digits_data, config(num_iterations=250), [])
    alone.run()
    with_students = engine(digits_data, config(num_iterations=250),
                           [StudentConfig("predictive", thinning=3), StudentConfig("entropy", "U_o", thinning=5)])
    with_students.run()
    assert torch.equal(teacher(alone), teacher(with_students))
    assert alone.teacher_metrics(0) == with_students.teacher_metrics(0)


def test_the_evaluation_chunk_moves_no_number_and_is_checked():
    """The automatic evaluation chunk and the 500-row chunks results were stored with give the same ensemble
    sums, metrics and student outputs, bit for bit, on a test set of 1,010 rows, whose last ten rows 500-row
    chunks evaluate alone; a chunk that is no positive integer is refused, naming the parameter."""
    data = make_digits_data(n_train=787)
    students = [StudentConfig("entropy", "U_o", thinning=5)]
    runs = [engine(data, config(num_iterations=150, eval_batch_size=size), students) for size in (None, 500)]
    for r in runs:
        r.run()
    auto, chunked = runs
    assert auto.num_eval == 1_010 and auto.setup.eval_chunk >= 1_000 and chunked.setup.eval_chunk == 500
    for name, sums in auto.ensemble.sums.items():
        assert torch.equal(sums, chunked.ensemble.sums[name]), name
    assert auto.teacher_metrics(0) == chunked.teacher_metrics(0)
    outputs = [r.student_outputs()[0]["test"] for r in runs]
    assert all(torch.equal(outputs[0][label], outputs[1][label]) for label in outputs[0])
    for bad in (0, True, 2.5, "auto"):
        with pytest.raises(ValueError, match=f"GPEDConfig.eval_batch_size={bad!r}: must be None"):
            config(eval_batch_size=bad)


@pytest.mark.parametrize("seeds", [(0,), (0, 1)])
def test_the_fused_sgld_update_moves_no_number(digits_data, monkeypatch, seeds):
    """An SGLD teacher updated by the compiled loop (sgld_fused_update_, which the engine uses over buffers of at
    least FUSED_MIN_ELEMENTS, here lowered to every buffer) takes the element-wise update's steps bit for bit, for
    one chain and a batch, with a constant step and with a polynomial schedule (its factors a device row); its
    students and ensemble follow."""
    students = [StudentConfig("predictive", thinning=3), StudentConfig("entropy", "U_o", thinning=5)]
    schedule = dataclasses.replace(SGLD, schedule="polynomial", decay_steps=20, decay_power=0.55)
    for sampler in (SGLD, schedule):
        runs = []
        for threshold in (10 ** 12, 0):
            monkeypatch.setitem(FUSED_MIN_ELEMENTS, "cpu", threshold)
            cfg = [config(num_iterations=60, burn_in=20, sampler=sampler, seed=s) for s in seeds]
            runs.append(GPEDEngine([build_chain(digits_data, c, students) for c in cfg]))
            runs[-1].run()
        element_wise, fused = runs
        assert element_wise.setup.fused_update is None
        assert fused.setup.fused_update is not None and fused.setup.fused_update.update.compiled
        assert torch.equal(flat(fused.chain.params), flat(element_wise.chain.params))
        assert all(torch.equal(flat(a.params), flat(b.params)) for a, b in zip(fused.students, element_wise.students))
        assert [fused.teacher_metrics(k) for k in range(len(seeds))] == [
            element_wise.teacher_metrics(k) for k in range(len(seeds))]


def test_the_fused_update_starts_where_it_pays_on_each_device():
    """SGLD's fused update starts at a larger buffer on the CPU (memory passes only) than on CUDA (launches too):
    one FCNN chain of the paper's size is fused on CUDA, not on the CPU; five are on both; other devices take the
    CPU's threshold."""
    fcnn = 784 * 400 + 400 + 400 * 400 + 400 + 400 * 10 + 10
    cpu, cuda, mps = (fused_min_elements(torch.device(d)) for d in ("cpu", "cuda", "mps"))
    assert cuda <= fcnn < cpu <= 5 * fcnn and mps == cpu


def test_seed_reproducibility(digits_data):
    students = [StudentConfig("predictive", thinning=5, arch=ArchSpec("fcnn", dropout=0.5))]
    runs = [engine(digits_data, config(num_iterations=200, seed=s), students) for s in (0, 0, 1)]
    for r in runs:
        r.run()
    a, b, c = runs
    assert torch.equal(teacher(a), teacher(b)) and torch.equal(student(a, 0), student(b, 0))
    assert not torch.equal(teacher(a), teacher(c))


def test_resume_from_checkpoint_equals_uninterrupted_run(digits_data, tmp_path):
    students = [StudentConfig("predictive", thinning=3, arch=ArchSpec("fcnn", dropout=0.5)),
                StudentConfig("entropy", "U_o", thinning=5)]
    cfg = config(num_iterations=300, checkpoint_every=1000)
    full = engine(digits_data, cfg, students)
    full_result = run_engine(full)[0]
    ckpt = tmp_path / "run.pt"
    partial = run_engine(engine(digits_data, cfg, students), [ckpt], max_steps=170)[0]  # "interrupted"
    assert not partial.finished and ckpt.exists()
    resumed = engine(digits_data, cfg, students)  # a fresh object, as in a new process
    out = run_engine(resumed, [ckpt])[0]
    assert out.finished and resumed.t == 300 and resumed.resumed_from == 170
    assert torch.equal(teacher(full), teacher(resumed))
    for j in range(2):
        assert torch.equal(student(full, j), student(resumed, j))
    assert torch.equal(full.students[1].store.sums, resumed.students[1].store.sums)
    assert full.teacher_metrics(0) == resumed.teacher_metrics(0)
    # the interrupted run logged at step 170 too: every other row is the uninterrupted run's, and the
    # running averages since the last log point differ only in the row after the interruption (step 200)
    hist = out.history[out.history["step"] != 170].reset_index(drop=True)
    cols = [c for c in full_result.history if c != "elapsed_s"]
    same = hist["step"] != 200
    assert full_result.history.loc[same, cols].equals(hist.loc[same, cols])
    evaluation = [c for c in cols if "train" not in c]
    assert full_result.history.loc[~same, evaluation].equals(hist.loc[~same, evaluation])
    # a finished checkpoint resumes to the same result without further steps
    again = engine(digits_data, cfg, students)
    run_engine(again, [ckpt])
    assert again.resumed_from == 300 and torch.equal(teacher(again), teacher(full))


def test_a_checkpoint_between_log_points_holds_the_time_run_so_far(digits_data):
    """A resumed run's elapsed time (hence its summary's iterations per second) starts from the checkpoint's: a
    checkpoint written between log points held the time up to the last log point only (none before the first)."""
    class Grab:
        def on_log(self, e, rows): pass
        def on_checkpoint(self, e): held.append((e.t, e.run_state(0).elapsed))
        def on_end(self, e): pass

    held: list[tuple[int, float]] = []
    e = engine(digits_data, config(num_iterations=60, burn_in=10, log_every=40, checkpoint_every=30),
               [StudentConfig(thinning=5)])
    e.run(hooks=[Grab()])
    (t30, at30), (t60, at60) = held
    assert (t30, t60) == (30, 60) and 0 < at30 < at60


def test_checkpoint_is_never_silently_overwritten_and_corrupt_files_are_kept(digits_data, tmp_path):
    ckpt = tmp_path / "run.pt"
    distill(digits_data, config(num_iterations=120), [], checkpoint=ckpt)
    before = ckpt.read_bytes()
    with pytest.raises(FileExistsError, match="resume=True"):
        distill(digits_data, config(num_iterations=120), [], checkpoint=ckpt, resume=False)
    with pytest.raises(CheckpointError, match="another configuration"):
        distill(digits_data, config(num_iterations=120, seed=3), [], checkpoint=ckpt)
    assert ckpt.read_bytes() == before
    ckpt.write_bytes(before[: len(before) // 2])  # truncated, as by a full disk or a killed copy
    with pytest.raises(CheckpointError, match=r"run\.pt cannot be read.*left in place.*recompute"):
        distill(digits_data, config(num_iterations=120), [], checkpoint=ckpt)
    assert ckpt.exists() and len(ckpt.read_bytes()) == len(before) // 2
    # checkpoints hold tensors and plain data only
    good = tmp_path / "good.pt"
    distill(digits_data, config(num_iterations=120), [StudentConfig("entropy", "U_o", thinning=5)], checkpoint=good)
    torch.load(good, weights_only=True)
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


def test_diverging_chain_stops_with_a_message_naming_the_step_size(digits_data):
    bad = config(num_iterations=200, sampler=SGLDConfig(step_size=5.0, batch_size=50), log_every=50)
    with pytest.raises(FloatingPointError, match=r"step size eta=5.*lower GPEDConfig.sampler.step_size"):
        distill(digits_data, bad, [StudentConfig("predictive", thinning=2)])


def test_bad_input_is_rejected_before_any_work(digits_data):
    with pytest.raises(ValueError, match="estimator='U_x'"):
        StudentConfig(estimator="U_x")
    with pytest.raises(ValueError, match="thinning.*>= 1"):
        StudentConfig(thinning=0)
    with pytest.raises(ValueError, match="target='variance'"):
        StudentConfig(target="variance")
    with pytest.raises(ValueError, match="regularizer='l1'"):
        StudentConfig(regularizer="l1")
    with pytest.raises(ValueError, match="burn_in=500 must be < num_iterations=500"):
        config(num_iterations=500, burn_in=500)
    with pytest.raises(ValueError, match="model='mlp'"):
        config(model="mlp")
    with pytest.raises(ValueError, match="unique"):
        build_chain(digits_data, config(), [StudentConfig(), StudentConfig()])
    with pytest.raises(ValueError, match="gaussian likelihood"):
        build_chain(digits_data, config(), [StudentConfig("predictive_mean")])
    with pytest.raises(ValueError, match=r"maps 2 inputs to \(2, 7\)"):
        build_chain(digits_data,
                    config(model=lambda out: torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 7))), [])
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")


def test_group_lasso_regulariser_shrinks_groups(digits_data):
    base = dict(target="predictive", thinning=2, arch=ArchSpec("fcnn", 0.25, 0.25))
    plain = engine(digits_data, config(num_iterations=500), [StudentConfig(**base)])
    reg = engine(digits_data, config(num_iterations=500),
                 [StudentConfig(**base, regularizer="group_lasso", reg_weight=1e-2)])
    plain.run(), reg.run()
    norm = lambda e: float(e.students[0].params["1.weight"][0].norm(dim=1).sum())  # noqa: E731
    assert norm(reg) < 0.7 * norm(plain)
    assert reg.results()[0].summary.loc[0, "regularizer"] == "group_lasso"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_loop_has_no_host_synchronisation(digits_data):
    e = engine(digits_data, config(num_iterations=150, log_every=1000, device="cuda"),
               [StudentConfig("predictive", thinning=2), StudentConfig("entropy", "U_o", thinning=2)])
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(149):  # the steps between two log points (run() logs at its stop, which reads the device)
            e.step()
    finally:
        torch.cuda.set_sync_debug_mode(0)


def test_ood_sets_get_teacher_ensemble_and_student_outputs(digits_data):
    ood = torch.rand(30, 1, 8, 8, generator=torch.Generator().manual_seed(3))
    data = dataclasses.replace(digits_data, ood_x={"noise": ood})
    students = [StudentConfig("predictive+entropy", "U_s+U_o", thinning=2),
                StudentConfig(ENDD, "U_o", thinning=2)]
    result = distill(data, config(num_iterations=300, burn_in=100), students)
    n_test = len(digits_data.test_y)
    assert result.teacher_outputs["test"]["predictive+entropy"].shape == (n_test, 11)
    assert result.teacher_outputs["noise"]["predictive+entropy"].shape == (30, 11)
    assert result.student_outputs["noise"]["endd-U_o"].shape == (30, 11)
    assert torch.allclose(result.teacher_outputs["noise"]["predictive"].sum(-1), torch.ones(30), atol=1e-5)
    with torch.no_grad():
        raw = result.student_network("endd-U_o")(ood)
    torch.testing.assert_close(result.student_outputs["noise"]["endd-U_o"], ENDD.link(raw), rtol=1e-4, atol=1e-5)
    summary = result.summary.set_index("student")
    assert "target_mae" not in summary.columns or summary["target_mae"].isna()["endd-U_o"]
    assert summary.loc["endd-U_o", "student_nll"] > 0 and summary.loc["predictive+entropy-U_s+U_o", "entropy_mae"] > 0


def test_record_leaves_fields_at_their_defaults_out_of_keys(digits_data):
    spec = build_chain(digits_data, config(), [StudentConfig()])
    rec = spec.record()
    assert "progress" not in rec["gped"] and "device" not in rec["gped"] and "num_snapshots" not in rec["gped"]
    assert rec["students"] == [{"target": "predictive"}]
    assert build_chain(digits_data, config(num_snapshots=3), []).record()["gped"]["num_snapshots"] == 3
    with pytest.raises(ValueError, match="U_s\\+U_o"):
        StudentConfig("entropy", "U_s+U_o")


@pytest.mark.slow  # about 35 s: in make test-slow
def test_input_generators_and_derivative_matching_students(digits_data):
    students = [StudentConfig("predictive", "U_s", thinning=2, name="resample"),
                StudentConfig("predictive", "U_s", thinning=2, name="noise", input_generator="noise"),
                StudentConfig("predictive", "U_s", thinning=2, name="perturb", input_generator="perturb",
                              input_noise_std=0.2),
                StudentConfig("predictive", "U_s", thinning=2, name="derivative", derivative_weight=0.1)]
    e = engine(digits_data, config(num_iterations=1200, burn_in=200, log_every=600), students)
    assert len(e.chains[0].groups) == 4  # each generator (and derivative matching) draws its own S'
    # the noise generator draws pure noise with D''s overall pixel moments
    noise_key = students[1].group_key
    _, x = e.draw_distill_inputs(noise_key)
    mean, std = float(digits_data.distill_x.mean()), float(digits_data.distill_x.std())
    assert x.shape == (1, 100, 1, 8, 8)
    assert abs(float(x.mean()) - mean) < 0.05 and abs(float(x.std()) - std) < 0.05
    e.streams = type(e.streams)([0], list(e.chains[0].groups), e.device)  # undo the draw above
    result = run_engine(e)[0]
    s = result.summary.set_index("student")
    assert s.loc["resample", "student_accuracy"] > 0.85 and s.loc["derivative", "student_accuracy"] > 0.85
    assert s.loc["noise", "student_nll"] > s.loc["resample", "student_nll"] + 0.1  # the thesis: noise is bad
    assert s.loc["noise", "input_generator"] == "noise" and s.loc["resample", "input_generator"] == "data"
    # adding these students leaves the teacher and the first student unchanged
    plain = distill(digits_data, config(num_iterations=1200, burn_in=200, log_every=600), students[:1])
    torch.testing.assert_close(plain.teacher_outputs["test"]["predictive"],
                               result.teacher_outputs["test"]["predictive"])
    torch.testing.assert_close(plain.student_outputs["test"]["resample"], result.student_outputs["test"]["resample"])
    with pytest.raises(ValueError, match="U_s"):
        StudentConfig("predictive", "U_o", input_generator="noise")
    with pytest.raises(ValueError, match="input_generator"):
        StudentConfig(input_generator="gaussian")
    with pytest.raises(ValueError, match="derivative"):
        StudentConfig("entropy", derivative_weight=1.0)


def test_snapshots_are_the_teacher_after_the_snapshot_steps(digits_data):
    cfg = config(num_iterations=60, burn_in=20, num_snapshots=4, log_every=20)
    e = engine(digits_data, cfg, [])
    taken = {}
    while e.t < cfg.num_iterations:
        e.step()
        taken[e.t - 1] = teacher(e).clone()
    steps = sorted(e.chains[0].snapshot_at)
    assert steps[-1] == 59 and len(steps) == 4
    for k, t in enumerate(steps):
        assert torch.equal(e.snapshots[0, k], taken[t])


def test_student_lr_halves_every_k_labelled_set_epochs_after_burn_in():
    s = StudentConfig(lr=1e-3, lr_halving_epochs=200)
    # N = 10k, M = 100: an epoch is 100 steps, so the rate halves every 20,000 steps after B.
    assert student_lr(s, 1_000, burn_in=1_000, steps_per_epoch=100) == 1e-3
    assert student_lr(s, 20_999, burn_in=1_000, steps_per_epoch=100) == 1e-3
    assert student_lr(s, 21_000, burn_in=1_000, steps_per_epoch=100) == 5e-4
    assert student_lr(s, 1_000_000, burn_in=1_000, steps_per_epoch=100) == 1e-3 * 0.5 ** 49
    # N = 60k: 120,000 steps per halving, 8 halvings over the paper's T = 10^6.
    assert student_lr(s, 1_000_000, burn_in=1_000, steps_per_epoch=600) == 1e-3 * 0.5 ** 8
    assert student_lr(s, 500, burn_in=1_000, steps_per_epoch=600) == 1e-3  # burn-in: not started
    assert student_lr(StudentConfig(lr=3e-4, lr_halving_epochs=None), 10**6, 0, 1.0) == 3e-4


def test_student_lr_warms_up_over_the_students_own_updates():
    s = StudentConfig(lr=1e-3, lr_halving_epochs=None, thinning=10, lr_warmup=100)
    assert student_lr(s, 5_000, 1_000, 100.0, update=1) == 1e-5
    assert student_lr(s, 5_000, 1_000, 100.0, update=50) == 5e-4 and student_lr(s, 5, 1, 1.0, update=400) == 1e-3
    with pytest.raises(ValueError, match=r"lr_warmup=100 needs update"):
        student_lr(s, 5_000, 1_000, 100.0)
    # with a constant step size a student's updates up to t are floor(t / H) - floor(B / H), as the warm-up counted
    # them before it counted updates (so no constant-step chain's numbers move)
    chain = GPEDConfig(num_iterations=3_000, burn_in=1_005)
    for t in (0, 1_005, 1_009, 1_010, 1_011, 2_000, 2_999):
        assert student_updates(chain, 10, t) == max(t // 10 - 1_005 // 10, 0), t
    assert student_updates(chain, 10, 2_999) == student_updates(chain, 10) == 299 - 100


def test_a_warm_up_with_a_constant_step_size_keeps_its_key(digits_data):
    e = engine(digits_data, config(num_iterations=40, burn_in=10), [StudentConfig(thinning=2, lr_warmup=5)])
    assert e.chains[0].record()["students"] == [StudentConfig(thinning=2, lr_warmup=5).record()]


def test_engine_applies_the_halving_schedule_to_the_student_state(digits_data):
    # N = 1200, M = 50: an epoch is 24 steps; halving every 0.5 epochs = 12 steps after B = 100.
    e = engine(digits_data, config(num_iterations=140), [StudentConfig(thinning=2, lr=1e-3, lr_halving_epochs=0.5)])
    e.run()
    assert float(e.students[0].lr[0]) == pytest.approx(1e-3 * 0.5 ** ((138 - 100) // 12))


def test_event_schedule_is_public(digits_data):
    cfg = config(num_iterations=40, burn_in=10, eval_thinning=5, num_snapshots=2, log_every=40)
    students = [StudentConfig("predictive", "U_s", thinning=2), StudentConfig("entropy", "U_o", thinning=3),
                StudentConfig("predictive", "U_o", thinning=2, batch_size=20, name="small")]
    a = engine(digits_data, cfg, students)
    h2, h3, h2_small = (s.group_key for s in students)
    assert h2 == (2, 100, "data", 0.0, False) and h2.thinning == 2 and h3.batch_size == 100
    assert a.events(10) == StepEvents(t=10, snapshot=None, accumulate=False, groups=())  # t > B only
    assert a.events(14).groups == (h2_small, h2) and not a.events(14).accumulate  # sorted: M' = 20 first
    assert a.events(15) == StepEvents(t=15, snapshot=None, accumulate=True, groups=(h3,))
    assert a.events(30).groups == (h2_small, h2, h3) and a.events(30).accumulate
    assert [t for t in range(40) if a.events(t).snapshot is not None] == sorted(a.chains[0].snapshot_at)
    for _ in range(40):
        a.step()
    assert a.ensemble_count == 5 and a.snapshots_taken == 2  # ensemble: t = 15, 20, ..., 35
    assert a.adam_steps == [len(range(12, 40, 2)), len(range(12, 40, 3)), len(range(12, 40, 2))]


# ------------------------------------------------------------------ an independent oracle for GPEDEngine.step
def fcnn(params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """The ``fcnn`` preset without dropout: flatten, then three linear layers with ReLUs between them."""
    w1, b1, w2, b2, w3, b3 = params
    h = F.relu(F.linear(x.flatten(1), w1, b1))
    return F.linear(F.relu(F.linear(h, w2, b2)), w3, b3)


def plain_gped_loop(data: GPEDData, initial_teacher: list[torch.Tensor], initial_student: list[torch.Tensor], *,
                    seed: int, num_iterations: int, burn_in: int, step_size: float, prior_precision: float,
                    batch_size: int, thinning: int, distill_batch_size: int,
                    lr: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Algorithm 1 for one chain and one predictive U_s student, written from the paper's equations in
    plain PyTorch; returns the teacher's and the student's parameters after ``num_iterations`` steps,
    each as one vector.

    Step t: draw a minibatch S of M indices into D (with replacement) and xi ~ N(0, I), then Eq. 7,
    ``theta <- theta - (eta / 2) (N grad L(theta) + tau theta) + sqrt(eta) xi`` with L the minibatch
    mean NLL (softmax cross-entropy). After burn-in (t > B), every H steps: draw S' of M' indices into
    D', take the new sample's class probabilities p on it as the targets (U_s), and one Adam step
    (Kingma and Ba; betas 0.9 / 0.999, eps 1e-8 added to the bias-corrected sqrt(v)) on the cross-entropy
    ``-mean_i sum_y p_i(y) log q_phi(y | x'_i)``.

    The random draws are the kit's documented streams (gped_kit.engine.streams), made here with plain
    ``torch.Generator`` s: minibatches of D from seed ``4 s + 1``, the noise from ``4 s + 2`` (one
    draw of all P values per step, split in parameter order), the first (here only) distillation group's
    S' from ``4 s + 3 + 1000``. Where an equation can be rounded in several ways this loop rounds as the
    kit computes it (SGLD as ``theta + (-eta N / 2)(g + (tau / N) theta) + sqrt(eta) xi``, the targets as
    exp(log_softmax), Adam's moments as ``torch.add(beta m, g, alpha=1 - beta)``, whose sum is rounded
    once, and its step as m times the reciprocal of the denominator times ``-lr / (1 - beta1^k)``), so
    that equal results are bit-identical, not merely close: the rounding order is all that is shared.
    """
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    x, y, x_distill = data.train_x, data.train_y, data.distill_x
    n = len(y)
    minibatches = torch.Generator(x.device).manual_seed(4 * seed + 1)
    noise = torch.Generator(x.device).manual_seed(4 * seed + 2)
    distill_inputs = torch.Generator(x.device).manual_seed(4 * seed + 3 + 1000)
    theta = [p.clone() for p in initial_teacher]
    phi = [p.clone() for p in initial_student]
    m = [torch.zeros_like(p) for p in phi]
    v = [torch.zeros_like(p) for p in phi]
    neg_half_step, prior, noise_scale = -step_size * n / 2, prior_precision / n, math.sqrt(step_size)
    lr = torch.tensor(lr, device=x.device)  # a float32 learning rate, as the students' state holds it
    updates = 0
    for t in range(num_iterations):
        index = torch.randint(n, (batch_size,), generator=minibatches, device=x.device)
        xi = torch.empty(sum(p.numel() for p in theta), device=x.device).normal_(generator=noise)
        leaves = [p.detach().requires_grad_(True) for p in theta]
        grads = torch.autograd.grad(F.cross_entropy(fcnn(leaves, x[index]), y[index]), leaves)
        xis = torch.split(xi, [p.numel() for p in theta])
        with torch.no_grad():
            theta = [p + neg_half_step * (g + prior * p) + noise_scale * z.view(p.shape)
                     for p, g, z in zip(theta, grads, xis)]
        if t > burn_in and t % thinning == 0:
            index = torch.randint(len(x_distill), (distill_batch_size,), generator=distill_inputs,
                                  device=x.device)
            inputs = x_distill[index]
            with torch.no_grad():
                targets = F.log_softmax(fcnn(theta, inputs), dim=-1).exp()
            leaves = [p.detach().requires_grad_(True) for p in phi]
            loss = -(targets * F.log_softmax(fcnn(leaves, inputs), dim=-1)).sum(-1).mean()
            grads = torch.autograd.grad(loss, leaves)
            updates += 1
            correction1, correction2 = 1 - beta1 ** updates, math.sqrt(1 - beta2 ** updates)
            with torch.no_grad():
                m = [torch.add(beta1 * m_i, g, alpha=1 - beta1) for m_i, g in zip(m, grads)]
                v = [torch.add(beta2 * v_i, g * g, alpha=1 - beta2) for v_i, g in zip(v, grads)]
                phi = [p + m_i * (1 / (v_i.sqrt() / correction2 + eps)) * (lr / -correction1)
                       for p, m_i, v_i in zip(phi, m, v)]
    return torch.cat([p.reshape(-1) for p in theta]), torch.cat([p.reshape(-1) for p in phi])


ORACLE = dict(num_iterations=60, burn_in=15, thinning=3, distill_batch_size=20, lr=1e-3)


def engine_and_oracle(data: GPEDData) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The teacher's and the student's parameters (as vectors) initially (``"initial"``) and after
    ``ORACLE["num_iterations"]`` steps of :meth:`GPEDEngine.step` (``"engine"``) and of
    :func:`plain_gped_loop` (``"oracle"``), from the same initial values and data."""
    o = ORACLE
    cfg = config(num_iterations=o["num_iterations"], burn_in=o["burn_in"], eval_thinning=5,
                 log_every=o["num_iterations"], seed=3,
                 sampler=SGLDConfig(step_size=5e-5, batch_size=50, prior_precision=2.0))
    spec = build_chain(data, cfg, [StudentConfig("predictive", "U_s", thinning=o["thinning"],
                                                 batch_size=o["distill_batch_size"], lr=o["lr"],
                                                 lr_halving_epochs=None)])
    e = GPEDEngine([spec])
    while e.t < o["num_iterations"]:
        e.step()
    oracle = plain_gped_loop(spec.data, list(spec.initial[0][0].values()), list(spec.initial[1][0].values()),
                             seed=cfg.seed, step_size=cfg.sampler.step_size,
                             prior_precision=cfg.sampler.prior_precision, batch_size=cfg.sampler.batch_size, **o)
    initial = tuple(torch.cat([p.reshape(-1) for p in values[0].values()]) for values in spec.initial)
    return {"initial": initial, "engine": (teacher(e), student(e, 0)), "oracle": oracle}


def test_engine_step_equals_a_plain_pytorch_loop_of_the_equations(digits_data):
    """GPEDEngine.step against :func:`plain_gped_loop`, which shares no code with the engine (its step
    functions, states, estimators, samplers, Adam or streams): only the initial values and the data
    come from the chain's spec. Bit-identical, since both round the same equations the same way."""
    out = engine_and_oracle(digits_data)
    (theta, phi), (theta_oracle, phi_oracle) = out["engine"], out["oracle"]
    assert not torch.equal(theta, out["initial"][0]) and not torch.equal(phi, out["initial"][1])  # both moved
    assert torch.equal(theta, theta_oracle)
    assert torch.equal(phi, phi_oracle)


def noise_of_twice_the_variance(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's SGLD noise drawn with variance 2 eta (``posteriors``' convention, lr = eta, misread)."""
    original = SGLDConfig.coefficients

    def coefficients(self: SGLDConfig, num_data: int) -> tuple[float, float, float]:
        prior, step, scale = original(self, num_data)
        return prior, step, scale * math.sqrt(2.0)

    monkeypatch.setattr(SGLDConfig, "coefficients", coefficients)


def adam_without_bias_corrections(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's students trained by Adam without its bias corrections."""
    monkeypatch.setattr("gped_kit.engine.engine.bias_corrections", lambda step: (1.0, 1.0))


@pytest.mark.parametrize("breaks, teacher_too", [(noise_of_twice_the_variance, True),
                                                  (adam_without_bias_corrections, False)])
def test_the_plain_loop_catches_a_wrong_noise_scale_or_bias_correction(digits_data, monkeypatch, breaks, teacher_too):
    """The oracle has teeth: with the engine broken in one place, its teacher (for the noise) and its
    student no longer match the plain loop, not even within rtol 1e-5."""
    breaks(monkeypatch)
    out = engine_and_oracle(digits_data)
    (theta, phi), (theta_oracle, phi_oracle) = out["engine"], out["oracle"]
    assert torch.equal(theta, theta_oracle) != teacher_too
    assert not torch.allclose(phi, phi_oracle, rtol=1e-5, atol=0.0)
    if teacher_too:
        assert not torch.allclose(theta, theta_oracle, rtol=1e-5, atol=0.0)

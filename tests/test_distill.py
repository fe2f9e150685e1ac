"""Algorithm 1 end to end on real (8x8 digits) data: learning, invariants, resume, errors."""

import pytest
import torch

from gped_kit.distill import GPEDConfig, GPEDRun, StudentConfig, resolve_device, run_gped, student_lr
from gped_kit.models import ArchSpec
from gped_kit.samplers import SGLDConfig

SGLD = SGLDConfig(step_size=5e-5, batch_size=50)


def config(**kw):
    base = dict(model="fcnn", sgld=SGLD, num_iterations=400, burn_in=100, eval_thinning=10, log_every=100,
                checkpoint_every=100, progress=False, device="cpu")
    base.update(kw)
    return GPEDConfig(**base)


def params(module):
    return torch.cat([p.detach().flatten() for p in module.parameters()])


@pytest.fixture(scope="module")
def trained(digits_data):
    students = [StudentConfig("predictive", "U_s", thinning=2),
                StudentConfig("entropy", "U_o", thinning=2),
                StudentConfig("predictive+entropy", "U_o", thinning=4, arch=ArchSpec("fcnn", 0.5, 0.5))]
    run = GPEDRun(digits_data, config(num_iterations=2000, burn_in=300, log_every=500), students)
    return run, run.run()


def test_teacher_and_students_learn_on_real_digits(trained):
    run, result = trained
    s = result.summary.set_index("student")
    assert result.finished and result.steps_done == 2000
    assert s.loc["predictive-U_s", "teacher_accuracy"] > 0.9
    assert s.loc["predictive-U_s", "student_accuracy"] > 0.85
    assert s.loc["predictive-U_s", "nll_gap"] < 0.3
    assert s.loc["entropy-U_o", "entropy_mae"] < 0.15
    assert s.loc["predictive+entropy-U_o-K0.5x0.5", "student_params"] < s.loc["predictive-U_s", "student_params"]
    # tidy: one row per student, config + metric columns, history one row per (log point, student)
    assert len(result.summary) == 3
    assert {"dataset", "masking_rate", "step_size", "estimator", "k1", "teacher_nll", "student_nll"} <= set(result.summary)
    assert len(result.history) == 4 * 3 and result.history["step"].max() == 2000
    assert result.teacher_test["predictive"].shape == (len(run.data.test_y), 10)
    assert result.teacher_test["entropy"].shape == (len(run.data.test_y), 1)


def test_u_o_store_counts_every_distillation_visit(trained):
    run, _ = trained
    student = run.students[1]  # entropy, U_o, H=2, M'=100
    steps = len([t for t in range(2000) if t > 300 and t % 2 == 0])
    assert int(student.estimator.counts.sum()) == steps * 100
    assert run.accumulator.count == len([t for t in range(2000) if t > 300 and t % 10 == 0])


def test_teacher_chain_does_not_depend_on_attached_students(digits_data):
    alone = GPEDRun(digits_data, config(num_iterations=250), [])
    alone.run()
    with_students = GPEDRun(digits_data, config(num_iterations=250),
                            [StudentConfig("predictive", thinning=3), StudentConfig("entropy", "U_o", thinning=5)])
    with_students.run()
    assert torch.equal(params(alone.teacher), params(with_students.teacher))
    assert alone.teacher_metrics() == with_students.teacher_metrics()


def test_seed_reproducibility(digits_data):
    students = [StudentConfig("predictive", thinning=5, arch=ArchSpec("fcnn", dropout=0.5))]
    a = GPEDRun(digits_data, config(num_iterations=200), students)
    b = GPEDRun(digits_data, config(num_iterations=200), students)
    c = GPEDRun(digits_data, config(num_iterations=200, seed=1), students)
    for r in (a, b, c):
        r.run()
    assert torch.equal(params(a.teacher), params(b.teacher)) and torch.equal(params(a.students[0].net), params(b.students[0].net))
    assert not torch.equal(params(a.teacher), params(c.teacher))


def test_resume_from_checkpoint_equals_uninterrupted_run(digits_data, tmp_path):
    students = [StudentConfig("predictive", thinning=3, arch=ArchSpec("fcnn", dropout=0.5)),
                StudentConfig("entropy", "U_o", thinning=5)]
    full = GPEDRun(digits_data, config(num_iterations=300, checkpoint_every=1000), students)
    full.run()
    ckpt = tmp_path / "run.pt"
    first = GPEDRun(digits_data, config(num_iterations=300, checkpoint_every=1000), students)
    partial = first.run(checkpoint=ckpt, max_steps=170)  # "interrupted" after 170 steps
    assert not partial.finished and ckpt.exists()
    resumed = GPEDRun(digits_data, config(num_iterations=300, checkpoint_every=1000), students)
    out = resumed.run(checkpoint=ckpt)  # a fresh object, as in a new process
    assert out.finished and resumed.t == 300
    assert torch.equal(params(full.teacher), params(resumed.teacher))
    for s_full, s_res in zip(full.students, resumed.students):
        assert torch.equal(params(s_full.net), params(s_res.net))
    assert torch.equal(full.students[1].estimator.sums, resumed.students[1].estimator.sums)
    assert full.teacher_metrics() == resumed.teacher_metrics()
    # a finished checkpoint resumes to the same result without further steps
    again = GPEDRun(digits_data, config(num_iterations=300, checkpoint_every=1000), students)
    again.run(checkpoint=ckpt)
    assert torch.equal(params(again.teacher), params(full.teacher))


def test_checkpoint_is_never_silently_overwritten(digits_data, tmp_path):
    ckpt = tmp_path / "run.pt"
    GPEDRun(digits_data, config(num_iterations=120), []).run(checkpoint=ckpt)
    before = ckpt.read_bytes()
    with pytest.raises(FileExistsError, match="resume=True"):
        GPEDRun(digits_data, config(num_iterations=120), []).run(checkpoint=ckpt, resume=False)
    with pytest.raises(ValueError, match="another configuration"):
        GPEDRun(digits_data, config(num_iterations=120, seed=3), []).run(checkpoint=ckpt)
    assert ckpt.read_bytes() == before


def test_diverging_chain_stops_with_a_message_naming_the_step_size(digits_data):
    bad = config(num_iterations=200, sgld=SGLDConfig(step_size=5.0, batch_size=50), log_every=50)
    with pytest.raises(FloatingPointError, match=r"step size eta=5.*lower GPEDConfig.sgld.step_size"):
        run_gped(digits_data, bad, [StudentConfig("predictive", thinning=2)])


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
    with pytest.raises(ValueError, match="family='mlp'"):
        config(model="mlp")
    with pytest.raises(ValueError, match="unique"):
        GPEDRun(digits_data, config(), [StudentConfig(), StudentConfig()])
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")


def test_group_lasso_regulariser_hook_shrinks_groups(digits_data):
    base = dict(target="predictive", thinning=2, arch=ArchSpec("fcnn", 0.25, 0.25))
    plain = GPEDRun(digits_data, config(num_iterations=500), [StudentConfig(**base)])
    reg = GPEDRun(digits_data, config(num_iterations=500),
                  [StudentConfig(**base, regularizer="group_lasso", reg_weight=1e-2)])
    plain.run(), reg.run()
    norm = lambda net: float(net[1].weight.detach().norm(dim=1).sum())  # noqa: E731
    assert norm(reg.students[0].net) < 0.7 * norm(plain.students[0].net)
    assert reg.result().summary.loc[0, "regularizer"] == "group_lasso"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_loop_has_no_host_synchronisation(digits_data):
    run = GPEDRun(digits_data, config(num_iterations=150, log_every=1000, device="cuda"),
                  [StudentConfig("predictive", thinning=2), StudentConfig("entropy", "U_o", thinning=2)])
    torch.cuda.set_sync_debug_mode("error")
    try:
        run.run(max_steps=149)  # stops before the final log point, which synchronises on purpose
    finally:
        torch.cuda.set_sync_debug_mode(0)


def test_ood_sets_get_teacher_ensemble_and_student_outputs(digits_data):
    import dataclasses

    from gped_kit.data import DataConfig

    ood = torch.rand(30, 1, 8, 8, generator=torch.Generator().manual_seed(3))
    data = dataclasses.replace(digits_data, ood_x={"noise": ood},
                               config=DataConfig(ood_datasets=("fashion_mnist",)))
    students = [StudentConfig("predictive+entropy", "U_s+U_o", thinning=2),
                StudentConfig("endd", "U_o", thinning=2)]
    run = GPEDRun(data, config(num_iterations=300, burn_in=100), students)
    result = run.run()
    n_test = len(digits_data.test_y)
    assert result.teacher_test["predictive+entropy"].shape == (n_test, 11)
    assert result.teacher_ood["noise"]["predictive+entropy"].shape == (30, 11)
    assert result.student_ood["noise"]["endd-U_o"].shape == (30, 11)
    # the OOD part of the ensemble is the same computation as on the test set: check it on the
    # test inputs' own predictions
    assert torch.allclose(result.teacher_ood["noise"]["predictive"].sum(-1), torch.ones(30), atol=1e-5)
    with torch.no_grad():
        s = next(s for s in run.students if s.config.label == "endd-U_o")
        assert torch.allclose(result.student_ood["noise"]["endd-U_o"], s.target.link(s.net.eval()(ood)))
    summary = result.summary.set_index("student")
    assert "target_mae" not in summary.columns or summary["target_mae"].isna()["endd-U_o"]
    assert summary.loc["endd-U_o", "student_nll"] > 0 and summary.loc["predictive+entropy-U_s+U_o", "entropy_mae"] > 0


def test_fingerprint_leaves_out_ood_fields_at_their_defaults(digits_data):
    run = GPEDRun(digits_data, config(), [StudentConfig()])
    assert "ood_datasets" not in run.fingerprint() and "ood_size" not in run.fingerprint()
    with pytest.raises(ValueError, match="U_s\\+U_o"):
        StudentConfig("entropy", "U_s+U_o")


def test_input_generators_and_derivative_matching_students(digits_data):
    from gped_kit.distill import snapshot_steps  # noqa: F401 -- the module exposes it

    students = [StudentConfig("predictive", "U_s", thinning=2, name="resample"),
                StudentConfig("predictive", "U_s", thinning=2, name="noise", input_generator="noise"),
                StudentConfig("predictive", "U_s", thinning=2, name="perturb", input_generator="perturb",
                              input_noise_std=0.2),
                StudentConfig("predictive", "U_s", thinning=2, name="derivative", derivative_weight=0.1)]
    run = GPEDRun(digits_data, config(num_iterations=1200, burn_in=200, log_every=600), students)
    assert len(run.groups) == 4  # each generator (and derivative matching) draws its own S'
    # the noise generator draws pure noise with D''s overall pixel moments
    key = students[1].group_key
    _, x = run._distill_inputs(key, torch.Generator().manual_seed(0))
    assert x.shape == (100, 1, 8, 8)
    mean, std = float(digits_data.distill_x.mean()), float(digits_data.distill_x.std())
    assert abs(float(x.mean()) - mean) < 0.05 and abs(float(x.std()) - std) < 0.05
    result = run.run()
    s = result.summary.set_index("student")
    assert s.loc["resample", "student_accuracy"] > 0.85 and s.loc["derivative", "student_accuracy"] > 0.85
    assert s.loc["noise", "student_nll"] > s.loc["resample", "student_nll"] + 0.1  # the thesis: noise is bad
    assert s.loc["noise", "input_generator"] == "noise" and s.loc["resample", "input_generator"] == "data"
    # adding these students leaves the teacher unchanged
    plain = GPEDRun(digits_data, config(num_iterations=1200, burn_in=200, log_every=600), students[:1]).run()
    torch.testing.assert_close(plain.teacher_test["predictive"], result.teacher_test["predictive"])
    torch.testing.assert_close(plain.student_test["resample"], result.student_test["resample"])
    with pytest.raises(ValueError, match="U_s"):
        StudentConfig("predictive", "U_o", input_generator="noise")
    with pytest.raises(ValueError, match="input_generator"):
        StudentConfig(input_generator="gaussian")
    with pytest.raises(ValueError, match="derivative"):
        StudentConfig("entropy", derivative_weight=1.0)


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

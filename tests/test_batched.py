"""The batched engine (gped_kit.batched) against K separate runs of the sequential GPEDRun: equal
results per chain (up to round-off), checkpoint/resume in the sequential format, the batched
update rules, refusal of runs that cannot share one computation. Tiny synthetic data, tens of steps."""

import dataclasses

import pytest
import torch
from sklearn.datasets import load_digits

from gped_kit.batched import (BatchedGPED, adam_coefficients, batch_memory_bytes, batched_adam_step_,
                              batched_sgld_update_, check_batchable, memory_estimate, sgld_coefficients)
from gped_kit.data import DataConfig, ExperimentData
from gped_kit.distill import GPEDConfig, GPEDRun, StudentConfig
from gped_kit.models import ArchSpec
from gped_kit.samplers import SGLDConfig, sgld_update_

STUDENTS = (StudentConfig("predictive", "U_s", thinning=2, batch_size=20),
            StudentConfig("predictive", "U_o", thinning=2, batch_size=20),
            StudentConfig("entropy", "U_o", thinning=3, batch_size=20))  # a second distillation group


def _digits(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    if size != 8:
        x = torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    return x, torch.tensor(digits.target, dtype=torch.long)


def make_data(n_train: int, mask: int = 0, size: int = 8, n_distill: int = 150, n_test: int = 60,
              ood: bool = False, distill_noise_std: float = 0.0) -> ExperimentData:
    """A tiny ExperimentData: D = the first ``n_train`` digits (a ``mask`` x ``mask`` black square
    in the corner), D' the next ``n_distill``, a test set of ``n_test``."""
    x, y = _digits(size)
    if mask:
        x = x.clone()
        x[:, :, :mask, :mask] = 0
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    train = perm[:n_train]
    distill = perm[1000:1000 + n_distill]
    test = perm[-n_test:]
    ood_x = {"noise": torch.rand(25, 1, size, size, generator=torch.Generator().manual_seed(mask))} if ood else {}
    return ExperimentData(train_x=x[train], train_y=y[train], distill_x=x[distill], test_x=x[test], test_y=y[test],
                          num_classes=10, input_shape=(1, size, size), masking_rate=0.0,
                          config=DataConfig(mask_size=mask, distill_noise_std=distill_noise_std), ood_x=ood_x)


def config(seed=0, step_size=5e-5, prior_precision=10.0, **kw):
    base = dict(model="fcnn", sgld=SGLDConfig(step_size=step_size, prior_precision=prior_precision, batch_size=25),
                num_iterations=40, burn_in=10, eval_thinning=3, log_every=10, checkpoint_every=20,
                progress=False, device="cpu", seed=seed, eval_batch_size=32)
    base.update(kw)
    return GPEDConfig(**base)


# Three chains that differ in N, masking, seed, step size, prior precision and the students' lr schedule.
CHAINS = [dict(n_train=300, mask=0, seed=0, step_size=5e-5, prior_precision=10.0, lr=1e-3, halving=None),
          dict(n_train=500, mask=3, seed=1, step_size=3e-5, prior_precision=1.0, lr=2e-3, halving=0.03),
          dict(n_train=800, mask=0, seed=2, step_size=2e-5, prior_precision=0.0, lr=5e-4, halving=0.05)]


def build_runs(model="fcnn", size=8, students=STUDENTS, chains=CHAINS, ood=False, distill_noise_std=0.0, **kw):
    runs = []
    for c in chains:
        data = make_data(c["n_train"], c["mask"], size=size, ood=ood, distill_noise_std=distill_noise_std)
        studs = [dataclasses.replace(s, lr=c["lr"], lr_halving_epochs=c["halving"]) for s in students]
        runs.append(GPEDRun(data, config(seed=c["seed"], step_size=c["step_size"],
                                         prior_precision=c["prior_precision"], model=model, **kw), studs))
    return runs


def params(module):
    return torch.cat([p.detach().flatten() for p in module.parameters()])


def assert_runs_match(batched, sequential, rtol=1e-4, atol=1e-5, student_atol=None):
    """Teacher and student parameters, U_o stores, ensemble sums and counters of each chain.

    Batched matrix products and reductions sum in another order than the sequential ones, so the
    teacher differs by round-off (~1e-8 here); Adam normalises each gradient element by its own
    magnitude, which turns round-off in near-zero gradient elements into parameter differences
    of a small fraction of the lr (``student_atol``)."""
    for b, s in zip(batched, sequential):
        assert b.t == s.t
        torch.testing.assert_close(params(b.teacher), params(s.teacher), rtol=0, atol=atol)
        for sb, ss in zip(b.students, s.students):
            torch.testing.assert_close(params(sb.net), params(ss.net), rtol=0,
                                       atol=atol if student_atol is None else student_atol)
            if hasattr(ss.estimator, "sums"):
                torch.testing.assert_close(sb.estimator.sums, ss.estimator.sums, rtol=rtol, atol=atol)
                assert torch.equal(sb.estimator.counts, ss.estimator.counts)
            assert sb.steps_since_log == ss.steps_since_log
        assert b.accumulator.count == s.accumulator.count
        for name in s.accumulator.sums:
            torch.testing.assert_close(b.accumulator.sums[name], s.accumulator.sums[name], rtol=rtol, atol=atol)


def assert_results_match(rb, rs, rtol=1e-4):
    hb, hs = rb.history, rs.history
    assert list(hb.columns) == list(hs.columns) and len(hb) == len(hs)
    numeric = [c for c in hs.columns if c not in ("student", "elapsed_s") and hs[c].dtype.kind in "fi"]
    torch.testing.assert_close(torch.tensor(hb[numeric].to_numpy(float)), torch.tensor(hs[numeric].to_numpy(float)),
                               rtol=rtol, atol=1e-6, equal_nan=True)
    assert list(hb["student"]) == list(hs["student"])
    sb, ss = rb.summary, rs.summary
    cols = [c for c in ss.columns if c not in ("iterations_per_s", "elapsed_s")]
    for c in cols:
        if ss[c].dtype.kind == "f":
            torch.testing.assert_close(torch.tensor(sb[c].to_numpy(float)), torch.tensor(ss[c].to_numpy(float)),
                                       rtol=rtol, atol=1e-6, equal_nan=True)
        else:
            assert list(sb[c]) == list(ss[c]), c
    for name in rs.teacher_test:
        torch.testing.assert_close(rb.teacher_test[name], rs.teacher_test[name], rtol=rtol, atol=1e-6)
    for name in rs.student_test:
        torch.testing.assert_close(rb.student_test[name], rs.student_test[name], rtol=rtol, atol=1e-5)
    torch.testing.assert_close(rb.teacher_ood, rs.teacher_ood, rtol=rtol, atol=1e-6)
    torch.testing.assert_close(rb.student_ood, rs.student_ood, rtol=rtol, atol=1e-5)
    assert rb.finished == rs.finished and rb.steps_done == rs.steps_done


def check_batched_equals_sequential(model: str, size: int, device: str = "cpu") -> None:
    kw = dict(model=model, size=size, ood=model == "fcnn", device=device)
    sequential = build_runs(**kw)
    expected = [r.run() for r in sequential]
    runs = build_runs(**kw)
    results = BatchedGPED(runs).run()
    assert_runs_match(runs, sequential)
    for rb, rs in zip(results, expected):
        assert_results_match(rb, rs)
    if model == "fcnn":  # the OOD sets go through the same ensemble
        torch.testing.assert_close(results[1].teacher_ood["noise"]["entropy"],
                                   expected[1].teacher_ood["noise"]["entropy"])


@pytest.mark.parametrize("model,size", [("fcnn", 8), ("cnn_mnist", 16)])
def test_batched_equals_sequential_runs(model, size):
    check_batched_equals_sequential(model, size)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("model,size", [("fcnn", 8), ("cnn_mnist", 16)])
def test_batched_equals_sequential_runs_on_cuda(model, size):
    check_batched_equals_sequential(model, size, device="cuda")


def test_checkpoint_resume_equals_uninterrupted_and_sequential_resumes_batched_checkpoints(tmp_path):
    import shutil

    full = build_runs()
    uninterrupted = BatchedGPED(full).run()
    # the sequential reference for an interruption after 17 steps (its history has a row at step 17)
    seq_paths = [tmp_path / f"seq{k}.pt" for k in range(len(CHAINS))]
    sequential = build_runs()
    for run, path in zip(sequential, seq_paths):
        run.run(checkpoint=path, max_steps=17)
    seq_resumed = build_runs()
    expected = [run.run(checkpoint=path) for run, path in zip(seq_resumed, seq_paths)]

    paths = [tmp_path / f"chain{k}.pt" for k in range(len(CHAINS))]
    partial = BatchedGPED(build_runs()).run(checkpoints=paths, max_steps=17)  # "interrupted" after 17 steps
    assert all(not r.finished and r.steps_done == 17 for r in partial) and all(p.exists() for p in paths)
    # a checkpoint holds only its own chain (not the whole stacked storage)
    assert paths[0].stat().st_size < 1.2 * seq_paths[0].stat().st_size
    # a sequential run resumes a checkpoint written by the batched engine
    shutil.copy(paths[1], tmp_path / "copy1.pt")
    one = build_runs()[1]
    one_result = one.run(checkpoint=tmp_path / "copy1.pt")
    assert_runs_match([one], [seq_resumed[1]])
    assert_results_match(one_result, expected[1])
    # a fresh batched engine (as in a new process) resumes all of them
    resumed = build_runs()
    results = BatchedGPED(resumed).run(checkpoints=paths)
    assert all(r.finished for r in results)
    assert_runs_match(resumed, seq_resumed)
    for rb, rs in zip(results, expected):
        assert_results_match(rb, rs)
    # and it continues exactly where the uninterrupted batched run went
    assert_runs_match(resumed, full, atol=1e-6)
    for rb, ru in zip(results, uninterrupted):
        torch.testing.assert_close(rb.teacher_test, ru.teacher_test, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(rb.student_test, ru.student_test, rtol=1e-5, atol=1e-6)
    # a finished checkpoint resumes to the same result without further steps
    again = build_runs()
    BatchedGPED(again).run(checkpoints=paths)
    assert_runs_match(again, resumed, atol=0)
    # mixing chains at different steps is refused before any work
    torch.save({**torch.load(seq_paths[0], weights_only=False), "t": 5}, tmp_path / "odd.pt")
    with pytest.raises(ValueError, match="different steps"):
        BatchedGPED(build_runs()).run(checkpoints=[tmp_path / "odd.pt", paths[1], paths[2]])
    with pytest.raises(FileExistsError, match="resume=True"):
        BatchedGPED(build_runs()).run(checkpoints=paths, resume=False)


def test_check_batchable_rejects_incompatible_runs_with_a_clear_message():
    runs = build_runs()
    check_batchable(runs)
    other_t = GPEDRun(make_data(300), config(num_iterations=50), STUDENTS)
    with pytest.raises(ValueError,
                       match=r"runs\[1\] differs from runs\[0\] in GPEDConfig.num_iterations \(T\): 50 != 40"):
        check_batchable([runs[0], other_t])
    matching = [dataclasses.replace(s, derivative_weight=0.1) if s.target == "predictive" else s for s in STUDENTS]
    derivative = GPEDRun(make_data(300), config(), matching)
    with pytest.raises(ValueError, match="derivative_weight=0.1.*not supported"):
        check_batchable([runs[0], derivative])
    narrow = GPEDRun(make_data(300), config(), [dataclasses.replace(s, arch=ArchSpec("fcnn", 0.5, 0.5))
                                                  for s in STUDENTS])
    with pytest.raises(ValueError, match="student 0.*in arch"):
        check_batchable([runs[0], narrow])
    small_d = GPEDRun(make_data(300, n_distill=100), config(), STUDENTS)
    with pytest.raises(ValueError, match=r"\|D'\|.*100 != 150"):
        check_batchable([runs[0], small_d])
    with pytest.raises(ValueError, match="num_snapshots=2"):
        check_batchable([GPEDRun(make_data(300), config(num_snapshots=2), STUDENTS)])
    with pytest.raises(ValueError, match="input_generator='perturb'"):
        check_batchable([GPEDRun(make_data(300), config(), [StudentConfig(input_generator="perturb")])])
    with pytest.raises(ValueError, match="same GPEDRun object"):
        check_batchable([runs[0], runs[0]])
    BatchedGPED(runs[:2])
    with pytest.raises(ValueError, match="already belongs"):
        BatchedGPED(runs[1:])


def test_batched_adam_equals_torch_adam():
    torch.manual_seed(0)
    K, shapes, lrs = 3, [(4, 5), (5,), (2, 3, 3)], [1e-3, 3e-2, 0.5]
    ref = [[torch.randn(s, requires_grad=True) for s in shapes] for _ in range(K)]
    opts = [torch.optim.Adam(p, lr=lr) for p, lr in zip(ref, lrs)]
    flat = torch.stack([torch.cat([p.detach().flatten() for p in ps]) for ps in ref])
    m, v = torch.zeros_like(flat), torch.zeros_like(flat)
    for step in range(1, 6):
        grads = torch.randn_like(flat) * (10.0 ** -step)
        for k in range(K):
            for p, g in zip(ref[k], grads[k].split([p.numel() for p in ref[k]])):
                p.grad = g.view_as(p).clone()
            opts[k].step()
        neg, bc2_sqrt = adam_coefficients(lrs, step)
        batched_adam_step_(flat, grads.clone(), m, v, torch.tensor(neg).view(K, 1), bc2_sqrt)
        expect = torch.stack([torch.cat([p.detach().flatten() for p in ps]) for ps in ref])
        torch.testing.assert_close(flat, expect, rtol=0, atol=0)
    assert torch.equal(m[1], torch.cat([opts[1].state[p]["exp_avg"].flatten() for p in ref[1]]))


def test_batched_sgld_update_equals_sequential_update_per_chain():
    torch.manual_seed(1)
    K, P = 3, 50
    eta, N, tau = [1e-4, 3e-5, 1e-6], [100, 2000, 60000], [10.0, 0.0, 1.0]
    theta, grad, noise = torch.randn(K, P), torch.randn(K, P), torch.randn(K, P)
    expect = theta.clone()
    for k in range(K):
        params = list(expect[k].split([20, 30]))
        sgld_update_(params, list(grad[k].clone().split([20, 30])), list(noise[k].split([20, 30])),
                     eta[k], N[k], tau[k])
    a, b, c = (torch.tensor(col).view(K, 1) for col in sgld_coefficients(eta, N, tau))
    batched_sgld_update_(theta, grad.clone(), noise, a, b, c)
    torch.testing.assert_close(theta, expect, rtol=0, atol=0)


def test_polynomial_schedule_perturbed_distillation_set_split_estimator_and_shared_data():
    """eta_t from the polynomial schedule (per-step host coefficients), D' perturbation of the data
    config (drawn from each group's generator) next to a "resample" group without it, the U_s+U_o
    estimator, a narrower student, and two chains on the same data object (stored once)."""
    sgld = dict(schedule="polynomial", decay_steps=20.0, decay_power=0.55, batch_size=25)
    shared = make_data(300, distill_noise_std=0.1)
    datas = [shared, shared, make_data(400)]
    students = [*STUDENTS[:2],
                StudentConfig("predictive+entropy", "U_s+U_o", thinning=2, batch_size=20,
                              arch=ArchSpec("fcnn", 0.5, 0.25)),
                StudentConfig("entropy", "U_s", thinning=2, batch_size=20, input_generator="resample")]

    def build():
        return [GPEDRun(d, config(seed=k, sgld=SGLDConfig(step_size=eta, **sgld), num_iterations=30), students)
                for k, (d, eta) in enumerate(zip(datas, [5e-5, 4e-5, 3e-5]))]

    sequential = build()
    expected = [r.run() for r in sequential]
    runs = build()
    batched = BatchedGPED(runs)
    assert batched._train_x.shape[0] == 700  # the shared D is stored once
    results = batched.run()
    assert_runs_match(runs, sequential, student_atol=2e-5)
    for rb, rs in zip(results, expected):
        assert_results_match(rb, rs)


def test_runs_are_views_of_the_stacks_and_memory_is_reported():
    runs = build_runs()
    batched = BatchedGPED(runs)
    first = next(runs[2].teacher.parameters())
    assert first.untyped_storage().data_ptr() == batched._theta.untyped_storage().data_ptr()
    batched.run(max_steps=15)
    # the runs are valid mid-way: their own evaluation works on the shared state
    assert runs[1].t == 15 and runs[1].result().steps_done == 15
    mem = batch_memory_bytes(runs)
    assert batched.memory_bytes() == mem  # the estimate is what the stacks hold
    P = sum(p.numel() for p in runs[0].teacher.parameters())
    assert mem["teacher"] == 3 * 3 * P * 4
    assert mem["u_o_stores"] == 3 * 150 * (11 + 2) * 4  # predictive U_o (10 + 1) and entropy U_o (1 + 1)
    assert mem["data"] == (300 + 500 + 800) * (64 * 4 + 8) + 2 * 150 * 64 * 4 + 2 * 60 * 64 * 4
    assert mem["total"] == sum(v for k, v in mem.items() if k != "total")
    grid = memory_estimate(24, 478_410, [478_410, 474_801], [10, 1], 60_000, 10_000, [10, 1], 720_000, 6, 6, 784)
    assert 1e9 < grid["total"] < 1e10


def test_dropout_students_run_batched_and_resume_reproducibly(tmp_path):
    """Dropout masks come from one global stream for all chains (no equality with GPEDRun), but a
    batched run interrupted and resumed equals an uninterrupted batched run."""
    students = [StudentConfig("predictive", "U_s", thinning=2, batch_size=20, arch=ArchSpec("fcnn", dropout=0.5))]
    full = build_runs(students=students)
    results = BatchedGPED(full).run()
    for r in results:
        pred = next(iter(r.student_test.values()))
        assert r.summary.loc[0, "student_accuracy"] > 0 and torch.isfinite(pred).all()
    paths = [tmp_path / f"chain{k}.pt" for k in range(len(CHAINS))]
    BatchedGPED(build_runs(students=students)).run(checkpoints=paths, max_steps=23)
    resumed = build_runs(students=students)
    BatchedGPED(resumed).run(checkpoints=paths)
    assert_runs_match(resumed, full, atol=0)


def test_batched_step_reads_nothing_back_from_the_device():
    """A CPU stand-in for the CUDA check below: no operator of a step (under vmap and grad too)
    reads a value back to the host or has a data-dependent output shape."""
    from torch.utils._python_dispatch import TorchDispatchMode

    reading = {"_local_scalar_dense", "nonzero", "masked_select", "is_nonzero", "equal", "unique", "_unique2",
               "unique_consecutive", "unique_dim", "masked_scatter", "repeat_interleave"}

    class Recorder(TorchDispatchMode):
        ops: set = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.add(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    batched = BatchedGPED(build_runs())
    for t in range(12):
        batched._step(t)
    with Recorder() as recorder:
        for t in range(12, 20):  # SGLD steps, ensemble updates, both distillation groups
            batched._step(t)
    assert {"index_add_", "normal_", "randint", "bmm", "addcdiv_"} <= recorder.ops  # it saw the step
    assert not recorder.ops & reading


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_batched_loop_has_no_host_synchronisation():
    runs = build_runs(device="cuda", log_every=1000)
    batched = BatchedGPED(runs)
    for t in range(12):  # warm-up past burn-in (allocator, pinned memory, first Adam steps)
        batched._step(t)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for t in range(12, 30):  # SGLD steps, ensemble updates and both distillation groups
            batched._step(t)
    finally:
        torch.cuda.set_sync_debug_mode(0)

"""K chains as one batched computation (vmap over the same step functions) against K separate
runs: equal results per chain up to round-off, checkpoints interchangeable with single-chain
runs, refusal of chains that cannot share one computation. Tiny real data, tens of steps."""

import dataclasses

import pytest
import torch
from sklearn.datasets import load_digits

from gped_kit.core.sgld import SGLDConfig
from gped_kit.data.container import GPEDData
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig, check_batchable
from gped_kit.engine.checkpoint import CheckpointError
from gped_kit.engine.run import run_engine
from gped_kit.engine.spec import build_chain
from gped_kit.engine.state import flat
from gped_kit.models.presets import ArchSpec

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
              ood: bool = False, distill_noise_std: float = 0.0) -> GPEDData:
    """D = the first ``n_train`` digits (a ``mask`` x ``mask`` black square in the corner), D' the
    next ``n_distill``, a test set of ``n_test``."""
    x, y = _digits(size)
    if mask:
        x = x.clone()
        x[:, :, :mask, :mask] = 0
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    train, distill, test = perm[:n_train], perm[1000:1000 + n_distill], perm[-n_test:]
    ood_x = {"noise": torch.rand(25, 1, size, size, generator=torch.Generator().manual_seed(mask))} if ood else {}
    return GPEDData(x[train], y[train], x[distill], x[test], y[test], 10, ood_x=ood_x,
                    distill_noise_std=distill_noise_std)


def config(seed=0, step_size=5e-5, prior_precision=10.0, **kw):
    base = dict(model="fcnn", sampler=SGLDConfig(step_size=step_size, prior_precision=prior_precision, batch_size=25),
                num_iterations=40, burn_in=10, eval_thinning=3, log_every=10, checkpoint_every=20,
                progress=False, device="cpu", seed=seed, eval_batch_size=32)
    base.update(kw)
    return GPEDConfig(**base)


# Chains that differ in N, masking, seed, step size, prior precision and the students' lr schedule.
CHAINS = [dict(n_train=300, mask=0, seed=0, step_size=5e-5, prior_precision=10.0, lr=1e-3, halving=None),
          dict(n_train=500, mask=3, seed=1, step_size=3e-5, prior_precision=1.0, lr=2e-3, halving=0.03),
          dict(n_train=800, mask=0, seed=2, step_size=2e-5, prior_precision=0.0, lr=5e-4, halving=0.05),
          dict(n_train=400, mask=2, seed=3, step_size=4e-5, prior_precision=5.0, lr=1e-3, halving=0.04)]


def chains(k=3, model="fcnn", size=8, students=STUDENTS, ood=False, distill_noise_std=0.0, **kw):
    out = []
    for i in range(k):
        c = dict(CHAINS[i % len(CHAINS)], seed=i)
        data = make_data(c["n_train"], c["mask"], size=size, ood=ood, distill_noise_std=distill_noise_std)
        studs = [dataclasses.replace(s, lr=c["lr"], lr_halving_epochs=c["halving"]) for s in students]
        out.append(build_chain(data, config(seed=c["seed"], step_size=c["step_size"],
                                            prior_precision=c["prior_precision"], model=model, **kw), studs))
    return out


def chain_tensors(engine: GPEDEngine, k: int) -> dict[str, torch.Tensor]:
    """Chain k's state: teacher and student parameters, U_o stores, ensemble sums."""
    out = {"teacher": flat(engine.chain.params)[k]}
    for j, s in enumerate(engine.students):
        out[f"student{j}"] = flat(s.params)[k]
        out[f"sums{j}"], out[f"counts{j}"] = s.store.sums[k], s.store.counts[k]
    out.update({f"ensemble:{n}": v[k] for n, v in engine.ensemble.sums.items()})
    return out


def assert_chains_match(a: dict, b: dict, atol=1e-5, student_atol=1e-4):
    """Batched matrix products sum in another order than single-chain ones, so values agree up to
    round-off; Adam divides each gradient element by its own magnitude, which turns round-off in
    near-zero gradient elements into parameter differences of a small fraction of the lr."""
    for name, value in a.items():
        if name.startswith("counts"):
            assert torch.equal(value, b[name]), name
        else:
            tol = student_atol if name.startswith("student") else atol
            torch.testing.assert_close(value, b[name], rtol=1e-4 if name.startswith(("sums", "ens")) else 0,
                                       atol=tol, msg=name)


def assert_engines_match(batched: GPEDEngine, singles: list[GPEDEngine], atol=1e-5, student_atol=1e-4):
    for k, single in enumerate(singles):
        assert batched.t == single.t and batched.ensemble_count == single.ensemble_count
        assert_chains_match(chain_tensors(batched, k), chain_tensors(single, 0), atol, student_atol)


def assert_results_match(rb, rs, rtol=1e-4):
    hb, hs = rb.history, rs.history
    assert list(hb.columns) == list(hs.columns) and len(hb) == len(hs)
    numeric = [c for c in hs.columns if c not in ("student", "elapsed_s") and hs[c].dtype.kind in "fi"]
    torch.testing.assert_close(torch.tensor(hb[numeric].to_numpy(float)), torch.tensor(hs[numeric].to_numpy(float)),
                               rtol=rtol, atol=1e-5, equal_nan=True)
    for name in rs.teacher_outputs:
        for target in rs.teacher_outputs[name]:
            torch.testing.assert_close(rb.teacher_outputs[name][target], rs.teacher_outputs[name][target],
                                       rtol=rtol, atol=1e-5)
        for label in rs.student_outputs[name]:
            torch.testing.assert_close(rb.student_outputs[name][label], rs.student_outputs[name][label],
                                       rtol=rtol, atol=1e-4)
    assert rb.finished == rs.finished and rb.steps_done == rs.steps_done


@pytest.mark.parametrize("k", [1, 4, 12])
def test_batched_equals_separate_chains(k):
    specs = chains(k, ood=True)
    batched = GPEDEngine(specs)
    singles = [GPEDEngine([s]) for s in chains(k, ood=True)]
    results_b = run_engine(batched)
    results_s = [run_engine(e)[0] for e in singles]
    assert_engines_match(batched, singles)
    for rb, rs in zip(results_b, results_s):
        assert_results_match(rb, rs)


def test_batched_cnn_equals_separate_chains():
    batched = GPEDEngine(chains(2, model="cnn_mnist", size=16))
    singles = [GPEDEngine([s]) for s in chains(2, model="cnn_mnist", size=16)]
    run_engine(batched)
    for e in singles:
        run_engine(e)
    assert_engines_match(batched, singles, atol=1e-5, student_atol=3e-4)


def test_batched_features_the_old_batched_engine_lacked():
    """Regularisers, input generators (perturbed, noise), derivative matching, D' noise of the data,
    the polynomial schedule and snapshots run batched and equal separate chains."""
    students = (StudentConfig("predictive", "U_s", thinning=2, batch_size=20, regularizer="group_lasso",
                              reg_weight=1e-3, name="lasso"),
                StudentConfig("predictive", "U_s", thinning=2, batch_size=20, input_generator="perturb",
                              input_noise_std=0.2, name="perturb"),
                StudentConfig("predictive", "U_s", thinning=3, batch_size=20, input_generator="noise", name="noise"),
                StudentConfig("predictive", "U_s", thinning=2, batch_size=20, derivative_weight=0.5, name="dm"),
                StudentConfig("predictive+entropy", "U_s+U_o", thinning=2, batch_size=20))
    kw = dict(students=students, distill_noise_std=0.05, num_snapshots=3)
    specs = chains(3, **kw)
    for spec in specs:
        spec.config = dataclasses.replace(spec.config, sampler=dataclasses.replace(
            spec.config.sampler, schedule="polynomial", decay_steps=20, decay_power=0.5))
    batched = GPEDEngine(specs)
    singles = []
    for s in chains(3, **kw):
        s.config = dataclasses.replace(s.config, sampler=dataclasses.replace(
            s.config.sampler, schedule="polynomial", decay_steps=20, decay_power=0.5))
        singles.append(GPEDEngine([s]))
    run_engine(batched)
    for e in singles:
        run_engine(e)
    assert_engines_match(batched, singles, student_atol=3e-4)
    for k, e in enumerate(singles):
        torch.testing.assert_close(batched.snapshots[k], e.snapshots[0], rtol=0, atol=1e-5)
    assert batched.snapshots_taken == 3


def test_checkpoints_are_interchangeable_between_batched_and_single_runs(tmp_path):
    paths = [tmp_path / f"chain{k}.pt" for k in range(3)]
    full = GPEDEngine(chains(3))
    run_engine(full)
    # interrupted batched run, resumed batched
    run_engine(GPEDEngine(chains(3)), paths, max_steps=17)
    resumed = GPEDEngine(chains(3))
    run_engine(resumed, paths)
    assert resumed.resumed_from == 17
    for k in range(3):  # bit-identical to the uninterrupted batch
        assert_chains_match(chain_tensors(resumed, k), chain_tensors(full, k), atol=0, student_atol=0)
    # a batched chain's checkpoint resumes as a single chain, and vice versa
    run_engine(GPEDEngine(chains(3)), [tmp_path / f"again{k}.pt" for k in range(3)], max_steps=23)
    single = GPEDEngine([chains(3)[1]])
    run_engine(single, [tmp_path / "again1.pt"])
    torch.testing.assert_close(flat(single.chain.params)[0], flat(full.chain.params)[1], rtol=0, atol=1e-5)
    # chains at different steps cannot be resumed as one batch
    run_engine(GPEDEngine([chains(3)[0]]), [tmp_path / "mixed0.pt"], max_steps=5)
    run_engine(GPEDEngine([chains(3)[1]]), [tmp_path / "mixed1.pt"], max_steps=9)
    with pytest.raises(ValueError, match="different steps"):
        run_engine(GPEDEngine(chains(2)), [tmp_path / "mixed0.pt", tmp_path / "mixed1.pt"])
    with pytest.raises(CheckpointError, match="another configuration"):
        run_engine(GPEDEngine(chains(2)), [tmp_path / "mixed1.pt", tmp_path / "mixed0.pt"])


def test_check_batchable_rejects_incompatible_chains_with_a_clear_message():
    a = chains(1)[0]
    different_t = build_chain(a.data, dataclasses.replace(a.config, num_iterations=50), [s.config for s in a.students])
    with pytest.raises(ValueError, match=r"chain 1 differs from chain 0 in GPEDConfig.num_iterations \(T\): 50 != 40"):
        check_batchable([a, different_t])
    other_arch = [dataclasses.replace(s.config, arch=ArchSpec("fcnn", 0.5, 0.5)) for s in a.students]
    with pytest.raises(ValueError, match="student 0 .* in network"):
        check_batchable([a, build_chain(a.data, a.config, other_arch)])
    small = build_chain(make_data(300, n_distill=100), a.config, [s.config for s in a.students])
    with pytest.raises(ValueError, match="U_o stores of different sizes"):
        check_batchable([a, small])
    with pytest.raises(ValueError, match="no chains"):
        check_batchable([])


def test_dropout_students_run_batched_and_resume_reproducibly(tmp_path):
    students = (StudentConfig("predictive", "U_s", thinning=2, batch_size=20, arch=ArchSpec("fcnn", dropout=0.5)),)
    full = GPEDEngine(chains(2, students=students))
    run_engine(full)
    paths = [tmp_path / "a.pt", tmp_path / "b.pt"]
    run_engine(GPEDEngine(chains(2, students=students)), paths, max_steps=21)
    resumed = GPEDEngine(chains(2, students=students))
    run_engine(resumed, paths)
    for k in range(2):
        assert torch.equal(flat(resumed.students[0].params)[k], flat(full.students[0].params)[k])


def test_batched_step_reads_nothing_back_from_the_device(monkeypatch):
    """Between log points the loop never converts a tensor to a Python value (the CPU stand-in for
    CUDA's sync-debug mode: ``.item()``, ``.tolist()``, ``float()``, ``bool()`` are all caught)."""
    engine = GPEDEngine(chains(3, students=STUDENTS + (StudentConfig("predictive", "U_s", thinning=2, batch_size=20,
                                                                      derivative_weight=0.5, name="dm"),)))
    assert_steps_read_nothing_back(engine, monkeypatch)


def assert_steps_read_nothing_back(engine: GPEDEngine, monkeypatch) -> None:
    """Run ``engine`` past burn-in (ensemble and distillation steps too), then 7 steps in which every
    conversion of a tensor to a Python value (``.item()``, ``.tolist()``, ``float()``, ``bool()``,
    ``int()``) raises; none may happen."""
    for _ in range(engine.config.burn_in + 5):
        engine.step()
    calls: list[str] = []

    def refuse(name):
        def method(self, *args, **kwargs):
            calls.append(name)
            raise AssertionError(f"host read {name} inside the loop")
        return method

    for name in ("item", "tolist", "__float__", "__bool__", "__int__"):
        monkeypatch.setattr(torch.Tensor, name, refuse(name))
    for _ in range(7):
        engine.step()
    monkeypatch.undo()
    assert calls == []


def test_memory_report_counts_shared_data_once():
    specs = chains(3)
    engine = GPEDEngine(specs)
    memory = engine.memory_bytes()
    assert memory["total"] == sum(v for k, v in memory.items() if k != "total")
    teacher_params = specs[0].teacher.num_params
    assert memory["teacher"] >= 3 * 4 * teacher_params  # parameters and the SGLD noise buffer of 3 chains
    # chains 0 and 2 have the same (unmasked) test set, chain 1 a masked one: two sets are stored
    assert engine.eval_sets.unique_count == 2 and engine.setup.train_sets.unique_count == 3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_batched_loop_has_no_host_synchronisation():
    assert_steps_without_host_sync(GPEDEngine(chains(3, device="cuda")))


def assert_steps_without_host_sync(engine: GPEDEngine) -> None:
    """The steps between two log points of a CUDA engine synchronise with the host nowhere (torch raises)."""
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(engine.config.log_every - 1):
            engine.step()
    finally:
        torch.cuda.set_sync_debug_mode(0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_batched_equals_separate_chains_on_cuda():
    batched = GPEDEngine(chains(3, device="cuda"))
    singles = [GPEDEngine([s]) for s in chains(3, device="cuda")]
    run_engine(batched)
    for e in singles:
        run_engine(e)
    assert_engines_match(batched, singles, atol=1e-4, student_atol=1e-3)

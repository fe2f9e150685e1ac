"""Hydra (paper 002): batched heads, the two losses' identities, snapshots, and distillation that
keeps the members' diversity (head m matches member m, not the others)."""

import pandas as pd
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from gped_kit import hydra as H
from gped_kit.distill import GPEDConfig, GPEDRun, snapshot_steps
from gped_kit.models import ArchSpec, build_network
from gped_kit.samplers import SGLDConfig


def test_batched_heads_equal_separate_mlps():
    torch.manual_seed(0)
    heads = H.Heads(3, [5, 4, 2])
    with torch.no_grad():
        for p in heads.parameters():
            p.normal_()
    h = torch.randn(7, 5)
    out = heads(h)
    assert out.shape == (3, 7, 2)
    for m in range(3):
        w0, b0, w1, b1 = heads.weights[0][m], heads.biases[0][m], heads.weights[1][m], heads.biases[1][m]
        expected = F.relu(h @ w0 + b0) @ w1 + b1
        torch.testing.assert_close(out[m], expected)
    clones = heads.cloned(4)
    assert clones.num_heads == 4
    out = clones(h)
    torch.testing.assert_close(out, out[:1].expand_as(out))
    torch.testing.assert_close(out[0], heads(h)[0])


def test_hydra_loss_is_mean_kl_plus_member_entropy():
    torch.manual_seed(1)
    student, members, T = torch.randn(4, 6, 3), torch.randn(4, 6, 3), 2.5
    p = F.softmax(members / T, -1)
    kl = (p * (p.log() - F.log_softmax(student / T, -1))).sum(-1).mean()
    entropy = -(p * p.log()).sum(-1).mean()
    torch.testing.assert_close(H.hydra_loss(student, members, T), T ** 2 * (kl + entropy))
    # phase 1 against one member is phase 2 with one head; against many it targets their mean
    torch.testing.assert_close(H.knowledge_distillation_loss(student[:1], members[:1], T),
                               H.hydra_loss(student[:1], members[:1], T))
    mean = p.mean(0)
    expected = -(T ** 2) * (mean * F.log_softmax(student[0] / T, -1)).sum(-1).mean()
    torch.testing.assert_close(H.knowledge_distillation_loss(student[:1], members, T), expected)


def test_build_hydra_uses_the_teacher_body():
    net = H.build_hydra("fcnn", (1, 8, 8), 10, num_heads=5, head_hidden=(100, 100))
    assert [m.out_features for m in net.body if isinstance(m, nn.Linear)] == [400, 400]
    assert [w.shape for w in net.heads.weights] == [(5, 400, 100), (5, 100, 100), (5, 100, 10)]
    assert net(torch.rand(3, 1, 8, 8)).shape == (5, 3, 10)
    with pytest.raises(ValueError, match="head_hidden"):
        H.HydraConfig(head_hidden=(0,))
    with pytest.raises(ValueError, match="temperature"):
        H.HydraConfig(temperature=0)


def test_snapshot_logits_load_each_parameter_vector():
    torch.manual_seed(2)
    nets = [build_network("fcnn", (2, 1, 1), 3) for _ in range(2)]
    snaps = torch.stack([nn.utils.parameters_to_vector(n.parameters()) for n in nets]).detach()
    x = torch.randn(9, 2, 1, 1)
    out = H.snapshot_logits(snaps, "fcnn", (2, 1, 1), 3, x, batch_size=4)
    for s, net in enumerate(nets):
        torch.testing.assert_close(out[s], net(x).detach())
    with pytest.raises(ValueError, match="do not fit"):
        H.snapshot_logits(snaps[:, :-1], "fcnn", (2, 1, 1), 3, x)


def test_hydra_heads_match_their_own_member(digits_data):
    """Members: three differently trained-looking networks (random, sharpened). Each head must end
    closer to its own member than to the others, and the head mixture's knowledge uncertainty
    must track the members' (diversity kept), where a single head has none."""
    torch.manual_seed(3)
    x = digits_data.distill_x[:600]
    members = []
    for _ in range(3):
        net = build_network("fcnn", (1, 8, 8), 10)
        members.append(3.0 * net(x).detach())
    logits = torch.stack(members)
    cfg = H.HydraConfig(head_hidden=(32,), phase1_steps=150, phase2_steps=600, batch_size=64, lr=3e-3, seed=0)
    result = H.train_hydra(logits, x, "fcnn", (1, 8, 8), cfg, progress=False)
    probs = result.net.head_probs(x)
    member_probs = F.softmax(logits, -1)
    dist = torch.tensor([[(probs[i] - member_probs[j]).abs().sum(-1).mean() for j in range(3)] for i in range(3)])
    assert (dist.argmin(dim=1) == torch.arange(3)).all(), dist
    assert dist.diag().max() < 0.5 * dist.mean()
    from gped_kit import uncertainty

    ours, ref = H.hydra_uncertainties(result.net, x), uncertainty.from_samples(member_probs)
    assert torch.corrcoef(torch.stack([ours.knowledge, ref.knowledge]))[0, 1] > 0.7
    assert result.cache_bytes == logits.numel() * 4
    assert [h["phase"] for h in result.history][-1] == "phase2"


def test_chain_keeps_evenly_thinned_snapshots_and_resumes_them(digits_data, tmp_path):
    cfg = GPEDConfig(model="fcnn", sgld=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=120,
                     burn_in=20, eval_thinning=10, log_every=40, checkpoint_every=40, progress=False,
                     device="cpu", num_snapshots=4)
    assert snapshot_steps(cfg) == [44, 69, 94, 119]
    run = GPEDRun(digits_data, cfg, [])
    result = run.run()
    assert result.snapshots.shape == (4, sum(p.numel() for p in run.teacher.parameters()))
    torch.testing.assert_close(result.snapshots[-1], nn.utils.parameters_to_vector(run.teacher.parameters()).detach())
    assert len(set(result.snapshots.sum(1).tolist())) == 4
    # interrupted and resumed: the same snapshots
    first = GPEDRun(digits_data, cfg, [])
    first.run(checkpoint=tmp_path / "c.pt", max_steps=60)
    resumed = GPEDRun(digits_data, cfg, []).run(checkpoint=tmp_path / "c.pt")
    torch.testing.assert_close(resumed.snapshots, result.snapshots)
    # runs without snapshots keep their earlier configuration key
    plain = GPEDRun(digits_data, GPEDConfig(**{**cfg.__dict__, "num_snapshots": 0}), [])
    assert "num_snapshots" not in plain.fingerprint() and "num_snapshots" in run.fingerprint()
    with pytest.raises(ValueError, match="num_snapshots"):
        GPEDConfig(num_iterations=10, burn_in=5, num_snapshots=6)


def _constant_hydra(probs: torch.Tensor) -> H.HydraNet:
    """A Hydra whose head m outputs log ``probs[m]`` (M, C) whatever the input (zero weights)."""
    heads = H.Heads(probs.shape[0], [3, probs.shape[1]])
    with torch.no_grad():
        heads.weights[0].zero_()
        heads.biases[0].copy_(probs.log().unsqueeze(1))
    return H.HydraNet(nn.Identity(), heads)


def test_marginal_variance_is_the_mean_over_heads_of_p_times_one_minus_p():
    # two heads, two classes: p_1 = (0.2, 0.8), p_2 = (0.6, 0.4)
    net = _constant_hydra(torch.tensor([[0.2, 0.8], [0.6, 0.4]]))
    x = torch.zeros(4, 3)
    mv, ev = H.hydra_marginal_variance(net, x), H.hydra_epistemic_variance(net, x)
    torch.testing.assert_close(mv, torch.full((4, 2), 0.20))  # (0.2 * 0.8 + 0.6 * 0.4) / 2
    torch.testing.assert_close(ev, torch.full((4, 2), 0.04))  # Var_m of (0.2, 0.6), and of (0.8, 0.4)
    # the kit's marginal-variance target g = p(1 - p), averaged over heads
    from gped_kit import targets

    torch.testing.assert_close(mv, targets.MARGINAL_VARIANCE.g(net.head_log_probs(x)).mean(0))
    # one head: no epistemic variance, the marginal variance is p(1 - p)
    one = _constant_hydra(torch.tensor([[0.1, 0.3, 0.6]]))
    torch.testing.assert_close(H.hydra_marginal_variance(one, x), torch.tensor([[0.09, 0.21, 0.24]]).expand(4, 3))
    torch.testing.assert_close(H.hydra_epistemic_variance(one, x), torch.zeros(4, 3))


def test_marginal_variance_identity_with_the_epistemic_variance():
    """E_m[p_m(1 - p_m)] = p_bar(1 - p_bar) - Var_m(p_m), on a random Hydra and on explicit samples."""
    torch.manual_seed(4)
    net = H.build_hydra("fcnn", (1, 8, 8), 10, num_heads=5, head_hidden=(16,))
    with torch.no_grad():
        for p in net.heads.parameters():
            p.normal_()  # diverse heads (build_hydra initialises them identically)
    x = torch.rand(11, 1, 8, 8)
    mv, ev = H.hydra_marginal_variance(net, x), H.hydra_epistemic_variance(net, x)
    p_bar = H.hydra_uncertainties(net, x).predictive
    assert mv.shape == ev.shape == (11, 10) and float(ev.max()) > 1e-3
    torch.testing.assert_close(mv, p_bar * (1 - p_bar) - ev, atol=1e-6, rtol=1e-5)
    assert bool((mv >= 0).all() and (mv <= 0.25).all())
    log_probs = torch.randn(7, 5, 4).log_softmax(-1)
    probs = log_probs.exp()
    torch.testing.assert_close(H.marginal_variance_from_samples(log_probs),
                               probs.mean(0) * (1 - probs.mean(0)) - H.epistemic_variance_from_samples(probs))
    with pytest.raises(ValueError, match=r"\(S, N, C\)"):
        H.marginal_variance_from_samples(log_probs[0])


def test_input_noise_is_rejected_because_targets_are_cached_on_clean_inputs():
    with pytest.raises(ValueError, match=r"input_noise_std=0\.3.*allowed only 0\.0"):
        H.HydraConfig(input_noise_std=0.3)
    with pytest.raises(ValueError, match="input_noise_std"):
        H.HydraConfig(input_noise_std=float("nan"))
    assert H.HydraConfig(input_noise_std=0.0).input_noise_std == 0.0


def test_comparison_memory_and_marginal_variance_from_the_run(digits_data):
    """The comparison's stores come from the run's own objects (estimators, teacher sums per set at
    its real size) and every method with a marginal variance gets one, Hydra's from its heads."""
    import dataclasses

    from gped_kit.experiments import (COMPARISON_PROFILES, comparison_marginal_variance, comparison_memory,
                                      comparison_students, comparison_table)

    data = dataclasses.replace(digits_data, ood_x={"mnist_rotated60": digits_data.test_x[:150].flip(3)})
    students = comparison_students("fcnn", {**COMPARISON_PROFILES["default"], "thinning": 2}, variants=False)
    cfg = GPEDConfig(model="fcnn", sgld=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=120,
                     burn_in=20, eval_thinning=10, log_every=60, checkpoint_every=120, progress=False,
                     device="cpu", num_snapshots=3)
    run = GPEDRun(data, cfg, students)
    result = run.run()
    logits = H.snapshot_logits(result.snapshots, "fcnn", (1, 8, 8), 10, data.distill_x)
    trained = H.train_hydra(logits, data.distill_x, "fcnn", (1, 8, 8),
                            H.HydraConfig(head_hidden=(16,), phase1_steps=10, phase2_steps=20), progress=False)

    memory = comparison_memory(result, data, trained, students)
    by_method = memory.groupby("method")["bytes"].sum()
    for s in run.students:  # KD and EnD2 (U_s): 0; GPED (U_s+U_o): the entropy column's sums and counts
        assert by_method[s.config.label] == s.estimator.nbytes
    assert by_method["GPED"] == data.distill_x.shape[0] * 2 * 4 and by_method["KD"] == 0
    assert by_method["Long-chain teacher"] == sum(t.numel() * t.element_size() for t in run.accumulator.sums.values())
    teacher_rows = memory[memory["method"] == "Long-chain teacher"]["what"].tolist()
    assert "(150 inputs" in teacher_rows[1] and f"({data.test_x.shape[0]} inputs" in teacher_rows[0]
    assert by_method["Hydra"] == result.snapshots.numel() * 4 + logits.numel() * 4

    mv = comparison_marginal_variance(result, data, "fcnn", trained.net, "mnist_rotated60")
    assert set(mv) == {"Snapshot ensemble", "EnD2", "Hydra"}  # the chain does not accumulate it
    x = data.ood_x["mnist_rotated60"]
    torch.testing.assert_close(mv["Hydra"], H.hydra_marginal_variance(trained.net, x))
    snap = H.snapshot_logits(result.snapshots, "fcnn", (1, 8, 8), 10, x).softmax(-1)
    torch.testing.assert_close(mv["Snapshot ensemble"], (snap * (1 - snap)).mean(0))
    assert all(bool((v >= 0).all() and (v <= 0.25).all()) and v.shape == (150, 10) for v in mv.values())

    table = comparison_table(result, data, "fcnn", trained.net).set_index(["eval_set", "method"])
    assert table.loc[("test", "Snapshot ensemble"), "mv_mae_snapshots"] == 0
    assert table.loc[("test", "Snapshot ensemble"), "entropy_mae_snapshots"] == 0
    assert table.loc[("test", "Long-chain teacher"), "entropy_mae_teacher"] == 0
    assert table.loc[("test", "Hydra"), "mv_mae_snapshots"] > 0 and pd.isna(table.loc[("test", "GPED"), "mv_mean"])
    assert "mv_mae_teacher" not in table

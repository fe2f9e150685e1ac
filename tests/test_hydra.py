"""Hydra (paper 002): batched heads, the two losses' identities, snapshots, and distillation that
keeps the members' diversity (head m matches member m, not the others)."""

import dataclasses

import pytest
import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from gped_kit.baselines import hydra as H
from gped_kit.core import targets, uncertainty
from gped_kit.core.sgld import SGLDConfig
from gped_kit.engine import GPEDConfig, GPEDEngine, distill, snapshot_steps
from gped_kit.engine.run import run_engine
from gped_kit.engine.spec import build_chain
from gped_kit.engine.state import chain_view, flat
from gped_kit.models.presets import build_network


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


def test_hydra_heads_match_their_own_member(digits_data, tmp_path):
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
    ours, ref = H.hydra_uncertainties(result.net, x), uncertainty.from_samples(member_probs)
    assert torch.corrcoef(torch.stack([ours.knowledge, ref.knowledge]))[0, 1] > 0.7
    assert result.cache_bytes == logits.numel() * 4
    assert [h["phase"] for h in result.history][-1] == "phase2"
    # saved and loaded (weights only): the same heads
    H.save_hydra(result, tmp_path / "hydra.pt")
    again = H.load_hydra(tmp_path / "hydra.pt", "fcnn", (1, 8, 8), 10, cfg)
    torch.testing.assert_close(again.net.head_probs(x[:20]), result.net.head_probs(x[:20]))
    assert again.history == result.history and again.cache_bytes == result.cache_bytes


def test_chain_keeps_evenly_thinned_snapshots_that_hydra_reads_as_the_teacher(digits_data, tmp_path):
    """The engine's snapshots are rows of flattened teacher parameters in named_parameters() order:
    loaded by snapshot_logits they give the teacher's own outputs; an interrupted and resumed chain
    keeps the same snapshots."""
    cfg = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=120,
                     burn_in=20, eval_thinning=10, log_every=40, checkpoint_every=40, progress=False,
                     device="cpu", num_snapshots=4)
    assert snapshot_steps(cfg) == [44, 69, 94, 119]
    engine = GPEDEngine([build_chain(digits_data, cfg, [])])
    result = run_engine(engine)[0]
    assert result.snapshots.shape == (4, engine.chains[0].teacher.num_params)
    assert len(set(result.snapshots.sum(1).tolist())) == 4
    torch.testing.assert_close(result.snapshots[-1], flat(engine.chain.params)[0])
    # the last snapshot, read back by Hydra's loader, is the final teacher network
    x = digits_data.test_x[:7]
    teacher = functional_call(build_network("fcnn", (1, 8, 8), 10).eval(), chain_view(engine.chain.params, 0), (x,))
    torch.testing.assert_close(H.snapshot_logits(result.snapshots, "fcnn", (1, 8, 8), 10, x)[-1], teacher)
    # interrupted and resumed: the same snapshots
    distill(digits_data, cfg, [], checkpoint=tmp_path / "c.pt", max_steps=60)
    resumed = distill(digits_data, cfg, [], checkpoint=tmp_path / "c.pt")
    torch.testing.assert_close(resumed.snapshots, result.snapshots)
    # chains without snapshots keep their earlier configuration key
    plain = build_chain(digits_data, dataclasses.replace(cfg, num_snapshots=0), []).record()
    assert "num_snapshots" not in plain["gped"]
    assert build_chain(digits_data, cfg, []).record()["gped"]["num_snapshots"] == 4
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


def test_config_rejects_bad_values_by_name_before_any_work():
    """One validation helper (gped_kit.core.options): bools are not integers, and each message names the field."""
    for kwargs, name in (({"phase1_steps": True}, "phase1_steps"), ({"batch_size": 0}, "batch_size"),
                         ({"head_hidden": (100, True)}, r"head_hidden\[1\]"), ({"lr": float("nan")}, "lr"),
                         ({"log_every": 2.5}, "log_every"), ({"seed": -1}, "seed")):
        with pytest.raises(ValueError, match=rf"HydraConfig\.{name}="):
            H.HydraConfig(**kwargs)
    assert H.HydraConfig(head_hidden=[8, 4]).head_hidden == (8, 4)

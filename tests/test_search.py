"""Experiment 3 (gped_kit.experiments.experiment3, gped_kit.models.pruning): pruning equals masking,
analytic sizes of pruned networks, Pareto frontiers on hand-made tables, fine-tuning, profiles and the
students of one chain, and the whole search end to end on real (8x8 digits) data through a results
store. Tables below marked SYNTHETIC are made-up numbers."""

import copy
import math

import pandas as pd
import pytest
import torch
from torch import nn

from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.status import Status
from gped_kit.engine import GPEDConfig
from gped_kit.experiments import chains as chains_module
from gped_kit.experiments import experiment3
from gped_kit.experiments.chains import ChainTask, run_chains
from gped_kit.experiments.experiment3 import (
    NO_COMPARABLE,
    PROFILES,
    Experiment3Settings,
    SearchResult,
    SearchSettings,
    base_student,
    best_student,
    comparable_latency,
    evaluate_student,
    experiment3_comparison,
    experiment3_task,
    figure_availability,
    finetune,
    frontier_table,
    group_beats_exhaustive,
    group_vs_exhaustive,
    load_search_results,
    merged_search,
    model_grid,
    pareto_front,
    result_lines,
    run_experiment3,
    search_candidates,
    search_students,
    task_targets,
    trend_sentence,
)
from gped_kit.experiments.experiment3.report import SKILL_QUANTITY, SMALL_SKILL_QUANTITY
from gped_kit.experiments.settings import Overrides, resolve_settings
from gped_kit.experiments.store import ResultsStore
from gped_kit.models.cost import count_flops
from gped_kit.models.presets import ArchSpec, build_network, count_parameters
from gped_kit.models.pruning import mask_network, prune, unit_keep_masks

EPS = 1e-3


def kill_units(net: nn.Sequential, dead: dict[int, list[int]], seed: int = 0) -> nn.Sequential:
    """Give the listed units of the listed weight layers (index among Conv2d/Linear layers) tiny
    incoming weights (|w| < EPS/2) and clearly positive or negative biases, as group l1/l2 would."""
    gen = torch.Generator().manual_seed(seed)
    layers = [m for m in net if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        for k, units in dead.items():
            w = layers[k].weight
            for u in units:
                w[u] = (torch.rand(w[u].shape, generator=gen) - 0.5) * EPS
                layers[k].bias[u] = 0.3 if u % 2 == 0 else -0.3
    return net


def weight_layers(net):
    return [m for m in net if isinstance(m, (nn.Conv2d, nn.Linear))]


CASES = {
    # family, input shape, dead units per weight layer (conv0, conv1, fc0, ...)
    "fcnn": (ArchSpec("fcnn", 0.1, 0.05, dropout=0.5), (1, 28, 28), {0: [0, 3, 7, 39], 1: [1, 2, 19]}),
    "cnn_mnist": (ArchSpec("cnn_mnist", 1, 0.5), (1, 28, 28), {0: [2, 5], 1: [0, 7, 8, 19], 2: [4, 11, 39]}),
    "cnn_cifar10": (ArchSpec("cnn_cifar10", 0.5, 0.2), (3, 32, 32), {0: [1], 1: [3, 15], 2: [0, 39], 3: [5]}),
}


@pytest.fixture(params=sorted(CASES))
def case(request):
    arch, shape, dead = CASES[request.param]
    torch.manual_seed(0)
    net = kill_units(build_network(arch, shape, 10), dead).eval()
    x = torch.rand((64, *shape), generator=torch.Generator().manual_seed(1))
    return net, shape, dead, x


# ----------------------------------------------------------------------------- pruning
def test_masks_find_exactly_the_dead_units(case):
    net, _, dead, _ = case
    masks = unit_keep_masks(net, EPS)
    assert len(masks) == len(weight_layers(net)) - 1
    for k, keep in enumerate(masks):
        assert sorted(torch.nonzero(~keep).flatten().tolist()) == sorted(dead.get(k, []))


def test_pruned_network_equals_the_masked_network(case):
    net, _, dead, x = case
    masks = unit_keep_masks(net, EPS)
    pruned = prune(net, EPS)
    widths = [m.out_features if isinstance(m, nn.Linear) else m.out_channels for m in weight_layers(pruned)]
    original = [m.out_features if isinstance(m, nn.Linear) else m.out_channels for m in weight_layers(net)]
    assert widths == [w - len(dead.get(k, [])) for k, w in enumerate(original)]
    with torch.no_grad():
        # folded biases: the removed units' constant relu(bias) carried into the next layer
        torch.testing.assert_close(pruned(x), mask_network(net, masks)(x), rtol=1e-5, atol=1e-5)
        # without folding: equal to the network with those units' weights AND biases zeroed
        bare = prune(net, EPS, fold_bias=False)
        torch.testing.assert_close(bare(x), mask_network(net, masks, zero_bias=True)(x), rtol=1e-5, atol=1e-5)
        # the two differ (biases of +-0.3 matter), and folding keeps the function of the trained net
        assert not torch.allclose(bare(x), pruned(x), atol=1e-3)
        assert (pruned(x) - net(x)).abs().max() < 0.05
    assert count_parameters(pruned) < count_parameters(net)


def test_conv_to_flatten_boundary_removes_hw_features_per_channel():
    arch, shape, _ = CASES["cnn_mnist"]
    torch.manual_seed(0)
    net = kill_units(build_network(arch, shape, 10), {1: [0, 1, 2, 19]}).eval()  # last conv only
    pruned = prune(net, EPS)
    linear = weight_layers(pruned)[2]
    assert linear.in_features == (20 - 4) * 16  # 4x4 features per channel after the second pool
    x = torch.rand((16, *shape), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(pruned(x), mask_network(net, unit_keep_masks(net, EPS))(x), rtol=1e-5, atol=1e-5)


def test_pruned_size_and_flops_match_analytic_counts():
    torch.manual_seed(0)
    net = kill_units(build_network(ArchSpec("cnn_mnist", 1, 0.5), (1, 28, 28), 10),
                     {0: [1, 2, 3], 1: [4, 5], 2: list(range(30))}).eval()
    pruned = prune(net, EPS)
    c1, c2, f = 10 - 3, 20 - 2, 40 - 30
    assert count_parameters(pruned) == c1 * 17 + c2 * (c1 * 16 + 1) + f * (c2 * 16 + 1) + 10 * (f + 1)
    assert count_flops(pruned, (1, 28, 28)) == 2 * (c1 * 16 * 625 + c2 * c1 * 16 * 81 + c2 * 16 * f + f * 10)


def test_every_layer_keeps_a_unit_and_the_output_layer_is_never_pruned():
    net = build_network(ArchSpec("fcnn", 0.02, 0.02), (1, 8, 8), 3)
    with torch.no_grad():
        for m in weight_layers(net):
            m.weight.zero_()
    masks = unit_keep_masks(net, EPS)
    assert [int(m.sum()) for m in masks] == [1, 1]
    pruned = prune(net, EPS)
    assert weight_layers(pruned)[-1].out_features == 3
    assert pruned(torch.rand(2, 1, 8, 8)).shape == (2, 3)


def test_group_norm_criterion_is_stricter_than_max_abs():
    net = build_network(ArchSpec("fcnn", 0.02, 0.02), (1, 8, 8), 3)  # 8 and 8 units, 64 inputs
    first = weight_layers(net)[0]
    with torch.no_grad():
        first.weight[0] = 0.9 * EPS  # every weight below eps, but the group norm 7.2 eps is not
        first.weight[1] = 0.01 * EPS
    assert not unit_keep_masks(net, EPS, "max_abs")[0][0]
    assert unit_keep_masks(net, EPS, "group_norm")[0][0]
    assert not unit_keep_masks(net, EPS, "group_norm")[0][1]
    assert bool(unit_keep_masks(net, 0.0)[0].all())  # eps = 0 prunes nothing


@pytest.mark.parametrize("padding, mode, foldable", [
    ("valid", "zeros", True), (0, "zeros", True), ((0, 0), "zeros", True),
    ("same", "zeros", False), (1, "zeros", False), ((0, 1), "zeros", False),
    (1, "replicate", True), ("same", "reflect", True),
])
def test_padding_of_the_next_conv_numeric_or_string(padding, mode, foldable):
    # A removed channel of the first conv emits the constant relu(0.3); folding it into the next
    # conv's bias is exact unless that conv pads with zeros (the border then sees 0, not the constant).
    torch.manual_seed(0)
    conv = nn.Conv2d(6, 5, 3, padding=padding, padding_mode=mode)
    features = 5 * conv(torch.zeros(1, 6, 8, 8)).shape[-2:].numel()
    net = kill_units(nn.Sequential(nn.Conv2d(1, 6, 3), nn.ReLU(), conv, nn.ReLU(), nn.Flatten(),
                                   nn.Linear(features, 3)), {0: [1, 4]}).eval()
    masks = unit_keep_masks(net, EPS)
    assert (~masks[0]).nonzero().flatten().tolist() == [1, 4]
    x = torch.rand((8, 1, 10, 10), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        bare = prune(net, EPS, fold_bias=False)  # always allowed: equals the masked net with zeroed biases
        assert weight_layers(bare)[1].padding == conv.padding and weight_layers(bare)[1].padding_mode == mode
        torch.testing.assert_close(bare(x), mask_network(net, masks, zero_bias=True)(x), rtol=1e-5, atol=1e-5)
        if foldable:
            torch.testing.assert_close(prune(net, EPS)(x), mask_network(net, masks)(x), rtol=1e-5, atol=1e-5)
        else:
            with pytest.raises(ValueError, match=r"net\[2\]: folding .* zero-padded convolution \(padding="
                                                 r".*not exact at the border; use fold_bias=False"):
                prune(net, EPS)


def test_prune_does_not_modify_its_input_and_keeps_the_mode():
    net = build_network(ArchSpec("fcnn", 0.05, 0.05, dropout=0.5), (1, 8, 8), 10)
    before = [p.clone() for p in net.parameters()]
    pruned = prune(kill_units(net, {0: [0]}), EPS)
    assert net.training and pruned.training
    assert any(isinstance(m, nn.Dropout) for m in pruned)
    assert len(before) == len(list(net.parameters()))


def test_bad_pruning_input_raises_clear_errors():
    net = build_network("fcnn", (1, 8, 8), 10)
    with pytest.raises(ValueError, match=r"eps=-0\.001.*>= 0"):
        prune(net, -1e-3)
    with pytest.raises(ValueError, match=r"eps=nan"):
        unit_keep_masks(net, float("nan"))
    with pytest.raises(ValueError, match=r"criterion='l1'.*allowed.*group_norm.*max_abs"):
        unit_keep_masks(net, EPS, "l1")
    with pytest.raises(TypeError, match="nn.Sequential"):
        prune(nn.Linear(3, 3), EPS)
    with pytest.raises(TypeError, match="BatchNorm1d"):
        prune(nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)), EPS)
    with pytest.raises(ValueError, match="expected 2 masks"):
        prune(net, masks=[torch.ones(400, dtype=torch.bool)])
    with pytest.raises(ValueError, match=r"prune_eps=-1.*>= 0"):
        SearchSettings(prune_eps=-1)
    with pytest.raises(ValueError, match=r"prune_criterion='x'.*allowed"):
        SearchSettings(prune_criterion="x")


# ----------------------------------------------------------------------------- Pareto frontier
def synthetic_table() -> pd.DataFrame:
    """SYNTHETIC: five students. Frontier in NLL vs FLOPs: a (1, 0.5), b (2, 0.4), e (4, 0.3);
    c (3, 0.45) and d (2, 0.6) are dominated by b. In accuracy vs FLOPs: a, b, c, e (c beats b)."""
    return pd.DataFrame({
        "student": list("abcdef"),
        "flops": [1, 2, 3, 2, 4, 5], "params": [10, 30, 20, 40, 50, 5],
        "student_nll": [0.5, 0.4, 0.45, 0.6, 0.3, math.nan],
        "student_accuracy": [0.80, 0.85, 0.90, 0.70, 0.95, 0.99],
    })


def test_pareto_front_on_a_hand_made_table():
    t = synthetic_table()
    assert pareto_front(t, "student_nll", "flops")["student"].tolist() == ["a", "b", "e"]
    assert pareto_front(t, "student_accuracy", "flops")["student"].tolist() == ["a", "b", "c", "e", "f"]
    # against parameters: f (5 params) has no NLL; c (20) beats a (10)? no: a is cheaper and worse -> both stay
    assert pareto_front(t, "student_nll", "params")["student"].tolist() == ["a", "c", "b", "e"]
    dup = pd.concat([t, t.iloc[[1]]])
    assert pareto_front(dup, "student_nll", "flops")["student"].tolist() == ["a", "b", "b", "e"]
    assert pareto_front(t.iloc[:0], "student_nll", "flops").empty


def test_latencies_of_pruned_convolutional_students_timed_in_another_layout_are_left_out():
    """A search stored before every network was timed in one layout (no ``latency_layout``) timed its pruned CNN
    students on the CPU in a slower layout: only those latencies are left out; FCNN, unpruned, CUDA and newly
    timed rows keep theirs, and so does every other number."""
    old = pd.DataFrame({
        "architecture": ["Conv(20,k4)-Conv(40,k4)-FC(160)-FC(10)"] * 3 + ["FC(400)-FC(10)", "Conv(8,k4)-FC(10)"],
        "prune_eps": [math.nan, 1e-3, 1e-3, 1e-3, 1e-3], "latency_device": ["cpu", "cpu", "cpu", "cpu", "cuda:0"],
        "latency_ms": [7.6, 15.1, 14.0, 2.0, 0.3], "student_nll": [0.1, 0.2, 0.3, 0.4, 0.5]})
    shown = comparable_latency(old)
    assert shown["latency_ms"].isna().tolist() == [False, True, True, False, False]
    assert shown["student_nll"].tolist() == old["student_nll"].tolist() and old["latency_ms"].notna().all()
    new = old.assign(latency_layout="inference")
    pd.testing.assert_frame_equal(comparable_latency(new), new)
    mixed = comparable_latency(pd.concat([old, new], ignore_index=True))
    assert mixed["latency_ms"].isna().tolist() == [False, True, True, False, False] + [False] * 5


def test_pareto_front_rejects_unknown_names():
    t = synthetic_table()
    with pytest.raises(ValueError, match=r"metric='nll'.*allowed.*student_nll"):
        pareto_front(t, "nll", "flops")
    with pytest.raises(ValueError, match=r"cost='time'.*allowed.*flops"):
        pareto_front(t, "student_nll", "time")
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['latency_ms'\]"):
        pareto_front(t, "student_nll", "latency_ms")
    with pytest.raises(TypeError):
        pareto_front(t.to_dict(), "student_nll", "flops")


def test_group_beats_exhaustive_counts_wins_at_equal_or_lower_cost():
    # SYNTHETIC. Exhaustive: (1 FLOP, NLL 0.5), (3, 0.3). Group students:
    # g1 (0.5, 0.9): cheaper than every exhaustive student and worse -> no comparable student (not a win);
    # g2 (2, 0.4) beats the 0.5 of the cheaper one -> win; g3 (4, 0.35) loses to 0.3 at 3 -> not better;
    # g4 (0.2, 0.25): cheaper than all AND better than all (it dominates the grid) -> win;
    # g5 (1, 0.5): equal cost and equal NLL -> not strictly better.
    t = pd.DataFrame({"method": ["exhaustive"] * 2 + ["group_lasso"] * 5,
                      "student": ["e1", "e3", "g1", "g2", "g3", "g4", "g5"],
                      "flops": [1, 3, 0.5, 2, 4, 0.2, 1], "student_nll": [0.5, 0.3, 0.9, 0.4, 0.35, 0.25, 0.5]})
    detail = group_vs_exhaustive(t, "student_nll", "flops").set_index("student")
    assert detail["verdict"].to_dict() == {"g1": NO_COMPARABLE, "g2": "better", "g3": "not better", "g4": "better",
                                           "g5": "not better"}
    assert detail.loc["g1", "compared_with"] == "higher cost only" and detail.loc["g1", "reference"] == 0.3
    assert detail.loc["g2", "compared_with"] == "equal or lower cost" and detail.loc["g2", "reference"] == 0.5
    assert group_beats_exhaustive(t, "student_nll", "flops") == "2 of 4 (1 more: no comparable exhaustive student)"
    assert group_beats_exhaustive(t[t["student"] != "g1"], "student_nll", "flops") == "2 of 4"
    # higher is better for accuracy: a cheap student with the best accuracy dominates the grid
    acc = t.assign(student_accuracy=[0.8, 0.9, 0.95, 0.85, 0.88, 0.5, 0.8]).drop(columns="student_nll")
    verdicts = group_vs_exhaustive(acc, "student_accuracy", "flops").set_index("student")["verdict"].to_dict()
    assert verdicts == {"g1": "better", "g2": "better", "g3": "not better", "g4": NO_COMPARABLE, "g5": "not better"}
    # no exhaustive student at all: nothing is comparable; missing metrics are left out
    only_group = t[t["method"] == "group_lasso"]
    assert group_beats_exhaustive(only_group, "student_nll", "flops") == f"0 of 0 (5 more: {NO_COMPARABLE})"
    assert group_beats_exhaustive(t.assign(student_nll=math.nan), "student_nll", "flops") == "0 of 0"
    assert group_vs_exhaustive(t.iloc[:0], "student_nll", "flops").empty


# ----------------------------------------------------------------------------- students, settings, profiles
def test_search_students_one_chain_grid_and_lambda_sweep():
    students = search_students("fcnn", [0.5, 1], [1, 2], [1e-6, 1e-4], targets=("predictive", "entropy"),
                               thinning={"predictive": 4, "entropy": 2})
    assert len(students) == 2 * (4 + 2) + 1  # and one U_o companion for the U_s predictive students
    assert len({s.label for s in students}) == len(students)
    (companion,) = [s for s in students if s.label.startswith("companion")]
    assert (companion.label, companion.estimator, companion.arch.k1, companion.arch.k2) == (
        "companion-predictive-U_o", "U_o", 1, 1)
    students = [s for s in students if s is not companion]
    grid = [s for s in students if s.regularizer is None]
    lasso = [s for s in students if s.regularizer == "group_lasso"]
    assert {(s.arch.k1, s.arch.k2) for s in grid} == {(0.5, 1), (0.5, 2), (1, 1), (1, 2)}
    assert all(s.arch.dropout == 0.5 for s in grid)  # the paper's FCNN student dropout
    assert all((s.arch.k1, s.arch.k2, s.arch.dropout) == (1, 2, 0.0) for s in lasso)  # largest, no dropout
    assert sorted(s.reg_weight for s in lasso) == [1e-6, 1e-6, 1e-4, 1e-4]
    # Section 4.1: U_s for the predictive distribution (Figure 2's baseline is Experiment 2's student);
    # the entropy always with U_o
    assert {s.estimator for s in students if s.target == "predictive"} == {"U_s"}
    assert {s.estimator for s in students if s.target == "entropy"} == {"U_o"}
    assert {s.estimator for s in search_students("fcnn", [1], [1], [1e-3], estimators={"predictive": "U_o"})} == {"U_o"}
    assert all(s.lr_halving_epochs == 200.0 for s in students)  # the paper's MNIST schedule
    assert {s.thinning for s in students if s.target == "entropy"} == {2}
    with pytest.raises(ValueError, match=r"reg_weights=\[\].*at least one"):
        search_students("fcnn", [1], [1], [])
    with pytest.raises(ValueError, match=r"reg_weights\[1\]=0: .*> 0"):
        search_students("fcnn", [1], [1], [1e-3, 0])
    with pytest.raises(ValueError, match=r"k2_values=\[\]"):
        search_students("fcnn", [1], [], [1e-3])
    with pytest.raises(ValueError, match=r"model='resnet'.*allowed"):
        search_students("resnet", [1], [1], [1e-3])


def test_profiles_keep_the_old_values():
    default, paper = PROFILES["default"], PROFILES["paper"]
    assert isinstance(default, Experiment3Settings) and isinstance(paper, Experiment3Settings)
    assert default.models == paper.models == ("cnn_mnist", "fcnn", "cnn_cifar10")
    assert default.targets == paper.targets == PROFILES["long"].targets == ("predictive", "entropy")
    assert (default.num_iterations, default.burn_in, default.predictive_thinning, default.entropy_thinning,
            default.eval_thinning, default.log_every, default.checkpoint_every) == (2_200, 1_000, 2, 2, 50, 400, 1_100)
    assert (paper.num_iterations, paper.burn_in, paper.predictive_thinning, paper.entropy_thinning,
            paper.eval_thinning, paper.log_every, paper.checkpoint_every) == (10**6, None, 100, 10, 100, 10_000, 50_000)
    assert not default.scale_step_size and not paper.scale_step_size
    assert default.k1_values == default.k2_values == (0.5, 1.0, 2.0)
    assert default.reg_weights == (1e-4, 1e-3, 1e-2)
    assert paper.reg_weights == (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3)
    assert (default.search.finetune_epochs, paper.search.finetune_epochs) == (1.0, None)
    assert (default.search.latency_repeats, paper.search.latency_repeats) == (20, 50)
    for p in (default, paper):
        assert (p.search.prune_eps, p.search.prune_criterion, p.search.finetune_lr, p.search.finetune_lr_halving_epochs,
                p.search.latency_batch_size) == (1e-3, "max_abs", None, None, 100)
    assert default.search_settings(seed=3) == SearchSettings(finetune_epochs=1.0, seed=3)
    assert paper.search_settings().latency_repeats == 50


def test_experiment3_task_uses_the_paper_setting_and_profiles():
    p = resolve_settings(PROFILES, "default", {})
    with pytest.raises(ValueError, match=r"target=None: the profile searches the targets \['predictive', 'entropy'\]"):
        experiment3_task("cnn_mnist", p)
    with pytest.raises(ValueError, match=r"target='variance' is not known; allowed"):
        experiment3_task("cnn_mnist", p, target="variance")
    task = experiment3_task("cnn_mnist", p, target="predictive")
    assert isinstance(task, ChainTask) and task_targets(task) == ("predictive",)
    assert (task.data.dataset, task.data.labelled_size, task.data.mask_size) == ("mnist", 60_000, 15)
    assert task.config.model_name == "cnn_mnist" and task.config.sampler.step_size == 4e-6
    assert len(task.students) == len(p.k1_values) * len(p.k2_values) + len(p.reg_weights) + 1  # + U_o companion
    assert task.config.num_iterations == p.num_iterations and task.config.burn_in == 1_000
    cifar = experiment3_task("cnn_cifar10", resolve_settings(PROFILES, "paper", {}), target="entropy")
    assert (cifar.data.dataset, cifar.data.labelled_size, cifar.data.mask_size, cifar.config.burn_in) == (
        "cifar10", 20_000, 0, 10_000)
    assert {s.thinning for s in cifar.students} == {10} and task_targets(cifar) == ("entropy",)
    # one chain per model and target; the entropy chain's students use U_o and need no companion; the two
    # chains of a model share the teacher chain's configuration (the same posterior samples)
    tasks = experiment3.experiment3_tasks(p)
    assert [(t.config.model_name, *task_targets(t)) for t in tasks] == [
        (m, target) for m in ("cnn_mnist", "fcnn", "cnn_cifar10") for target in ("predictive", "entropy")]
    entropy = tasks[1]
    assert len(entropy.students) == len(p.k1_values) * len(p.k2_values) + len(p.reg_weights)
    assert {s.estimator.value for s in entropy.students} == {"U_o"}
    assert entropy.config == tasks[0].config and entropy.data == tasks[0].data
    # a profile with one target needs no target=; the predictive chain is the one a predictive-only profile had
    only = resolve_settings(PROFILES, "default", {"targets": ["predictive"]})
    assert experiment3_task("cnn_mnist", only).students == task.students


def test_settings_validation_and_notebook_overrides():
    # a notebook's namespace: None = the profile's value; names that are not settings are ignored
    p = resolve_settings(PROFILES, "default", {"models": ["fcnn"], "targets": ["predictive", "entropy"],
                                               "reg_weights": [1e-3], "k1_values": None, "seed": 4})
    assert p.models == ("fcnn",) and p.targets == ("predictive", "entropy") and p.reg_weights == (1e-3,)
    assert p.k1_values == (0.5, 1.0, 2.0)
    with pytest.raises(ValueError, match=r"models='resnet' is not known; allowed"):
        resolve_settings(PROFILES, "default", {"models": ["resnet"]})
    with pytest.raises(ValueError, match=r"targets=\[\]"):
        resolve_settings(PROFILES, "default", {"targets": []})
    with pytest.raises(ValueError, match=r"target='nll' is not known"):
        resolve_settings(PROFILES, "default", {"targets": ["nll"]})
    with pytest.raises(ValueError, match=r"reg_weights\[0\]=0: .*> 0"):
        resolve_settings(PROFILES, "default", {"reg_weights": [0]})
    with pytest.raises(ValueError, match=r"k1_values\['fcnn'\]=\[\]"):
        resolve_settings(PROFILES, "default", {"k1_values": {"fcnn": [], "cnn_mnist": [1]}})
    with pytest.raises(ValueError, match=r"k2_values gives values for the models \['fcnn'\] only, not for "
                                         r"'cnn_mnist'"):
        resolve_settings(PROFILES, "paper", {"k2_values": {"fcnn": [1.0]}})
    with pytest.raises(ValueError, match=r"prune_eps=-1.*>= 0"):
        resolve_settings(PROFILES, "default", {"search.prune_eps": -1})
    with pytest.raises(ValueError, match=r"SearchSettings\.latency_repeats=True: must be an integer >= 1"):
        resolve_settings(PROFILES, "default", {"search.latency_repeats": True})
    search = Overrides()
    search.finetune_epochs, search.latency_repeats = 0.3, 2
    p = resolve_settings(PROFILES, "paper", {"search": search, "search.finetune_lr_halving_epochs": 0.1,
                                             "prune_eps": 0.5})  # prune_eps alone is not a setting: ignored
    assert p.search == SearchSettings(finetune_epochs=0.3, finetune_lr_halving_epochs=0.1, latency_repeats=2)
    with pytest.raises(ValueError, match=r"profile='fast' is not known"):
        resolve_settings(PROFILES, "fast", {})
    with pytest.raises(TypeError, match="Experiment3Settings"):
        experiment3_task("fcnn", {"k1_values": [1]})


def test_k_grids_per_model_and_the_paper_fcnn_ratios_are_reachable():
    assert model_grid({"k1_values": [0.5, 1]}, "k1_values", "fcnn") == [0.5, 1]
    assert model_grid({"k1_values": {"fcnn": [1, 5]}}, "k1_values", "fcnn") == [1, 5]
    with pytest.raises(ValueError, match=r"k1_values gives values for the models \['fcnn'\] only, not for 'cnn_mnist'"):
        model_grid({"k1_values": {"fcnn": [1]}}, "k1_values", "cnn_mnist")
    paper = resolve_settings(PROFILES, "paper", {})
    shape = (1, 28, 28)
    base = build_network(ArchSpec("fcnn"), shape, 10)
    base_params, base_flops = count_parameters(base), count_flops(base, shape)

    def ratios(arch):
        net = build_network(arch, shape, 10)
        return count_parameters(net) / base_params, count_flops(net, shape) / base_flops

    task = experiment3_task("fcnn", paper, target="predictive")
    grid = {(s.arch.k1, s.arch.k2) for s in task.students if s.regularizer is None}
    assert len(grid) == len(model_grid(paper, "k1_values", "fcnn")) * len(model_grid(paper, "k2_values", "fcnn"))
    assert paper.grid("fcnn") == ([0.5, 1.0, 2.0, 3.0, 4.0, 5.0], [0.5, 1.0, 2.0, 3.0, 4.0, 5.0])
    # Figures 8 and 9: the best FCNN student has ~9.9x the base's parameters and ~10x its FLOPs.
    # The group l1/l2 students start above that and prune back; the grid has a student within 2% of it.
    largest = {s.arch for s in task.students if s.regularizer == "group_lasso"}
    assert len(largest) == 1
    assert min(ratios(next(iter(largest)))) > 10.5
    assert any(abs(p - 9.9) / 9.9 < 0.02 and abs(f - 10) / 10 < 0.02
               for p, f in (ratios(ArchSpec("fcnn", k1, k2)) for k1, k2 in grid if k1 * k2 >= 16))
    # the CNNs keep 0.5 ... 4 (already 15.6x the base parameters, beyond the paper's 6.6x)
    for model in ("cnn_mnist", "cnn_cifar10"):
        assert max(model_grid(paper, "k1_values", model)) == max(model_grid(paper, "k2_values", model)) == 4.0
    # an override with one list applies to every model
    one = resolve_settings(PROFILES, "paper", {"k1_values": [1.0], "k2_values": [1.0, 2.0]})
    grid = {(s.arch.k1, s.arch.k2) for s in experiment3_task("cnn_mnist", one, target="entropy").students}
    assert grid == {(1, 1), (1, 2)}


# ----------------------------------------------------------------------------- fine-tuning
def test_finetune_takes_adam_steps_with_the_halving_schedule():
    """The kit's Adam (core.adam, the students' optimiser) with the lr halved every 3 steps: the same
    parameters as torch.optim.Adam given the same minibatches and rates, up to float round-off."""
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(64, 1, 8, 8, generator=gen)
    targets = torch.softmax(torch.randn(64, 10, generator=gen), dim=-1)
    torch.manual_seed(0)
    net = build_network(ArchSpec("fcnn", 0.1, 0.1), (1, 8, 8), 10)
    reference = copy.deepcopy(net)
    finetune(net, x, targets, "predictive", steps=10, lr=1e-2, batch_size=16, lr_halving_steps=3, seed=5)
    draws = torch.Generator().manual_seed(5)
    optimizer = torch.optim.Adam(reference.parameters(), lr=1e-2)
    reference.train()
    for step in range(10):
        for group in optimizer.param_groups:
            group["lr"] = 1e-2 * 0.5 ** (step // 3)
        idx = torch.randint(64, (16,), generator=draws)
        loss = -(targets[idx] * torch.log_softmax(reference(x[idx]), -1)).sum(-1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    for (name, got), want in zip(net.named_parameters(), reference.parameters()):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=name)
    assert not net.training


def test_finetune_fits_fixed_targets_and_is_seeded():
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(200, 1, 8, 8, generator=gen)
    targets = torch.softmax(3 * torch.randn(200, 10, generator=gen), dim=-1)

    def tuned(seed):
        torch.manual_seed(0)
        net = build_network(ArchSpec("fcnn", 0.1, 0.1), (1, 8, 8), 10)
        return finetune(net, x, targets, "predictive", steps=150, lr=1e-2, batch_size=50, seed=seed)

    torch.manual_seed(0)
    start = build_network(ArchSpec("fcnn", 0.1, 0.1), (1, 8, 8), 10)

    def loss(net):
        with torch.no_grad():
            return float(-(targets * torch.log_softmax(net(x), -1)).sum(-1).mean())

    a, b, c = tuned(0), tuned(0), tuned(1)
    assert loss(a) < 0.8 * loss(start)
    assert torch.equal(a[1].weight, b[1].weight) and not torch.equal(a[1].weight, c[1].weight)
    with pytest.raises(ValueError, match="steps=-1"):
        finetune(start, x, targets, "predictive", steps=-1, lr=1e-3)
    with pytest.raises(ValueError, match="equal length"):
        finetune(start, x, targets[:10], "predictive", steps=1, lr=1e-3)


def _hand_search(best_nll=0.40, best_skill=0.5, base_skill=0.5, small_skill=0.5, best_method="exhaustive"):
    """SYNTHETIC search table of an FCNN: the base student (100 FLOPs, NLL 0.50), a wider student (200 FLOPs,
    ``best_nll``) found by ``best_method`` and a fine-tuned group l1/l2 student at 40 FLOPs (NLL 0.60), each with
    its skill over the best constant prediction (NaN: not stored)."""
    rows = [("exhaustive", "distilled", "base", 0.50, 100.0, base_skill, True),
            (best_method, "distilled" if best_method == "exhaustive" else "fine-tuned", "wide", best_nll, 200.0,
             best_skill, False),
            ("group_lasso", "fine-tuned", "small", 0.60, 40.0, small_skill, False)]
    return pd.DataFrame([{"model": "fcnn", "target": "predictive", "method": method, "stage": stage, "student": student,
                          "student_nll": nll, "student_nll_skill": skill, "flops": flops, "macs": flops / 2,
                          "params": flops, "is_base": base, "architecture": student}
                         for method, stage, student, nll, flops, skill, base in rows])


def test_the_comparison_carries_the_skill_its_comparisons_rest_on():
    comp = experiment3_comparison(_hand_search(best_skill=0.3, base_skill=0.6, small_skill=0.2), "fcnn")
    assert list(comp.columns) == ["figure", "model", "metric", "quantity", "ours", "paper", "note"]
    q = comp.set_index("quantity")
    assert q.loc[SKILL_QUANTITY, "ours"] == 0.3  # the lower of the best's and the base's
    assert q.loc[SMALL_SKILL_QUANTITY, "ours"] == 0.2  # the lower of the small student's and the base's
    assert pd.isna(q.loc[SKILL_QUANTITY, "paper"])  # the paper states none
    q = experiment3_comparison(_hand_search(best_skill=math.nan), "fcnn").set_index("quantity")
    assert math.isnan(q.loc[SKILL_QUANTITY, "ours"]) and q.loc[SMALL_SKILL_QUANTITY, "ours"] == 0.5
    # the best is the base (a loss): its skill alone
    q = experiment3_comparison(_hand_search(best_nll=0.55, best_skill=0.01, base_skill=0.4), "fcnn").set_index(
        "quantity")
    assert q.loc[SKILL_QUANTITY, "ours"] == 0.4 and not q.loc["a searched student beats the base student", "ours"]


def test_the_trend_sentence_is_no_evidence_where_its_students_are_below_the_skill_floor():
    assert trend_sentence(experiment3_comparison(_hand_search(), "fcnn")).startswith("Yes: ")
    assert trend_sentence(experiment3_comparison(_hand_search(best_nll=0.55), "fcnn")).startswith("No: ")
    below = trend_sentence(experiment3_comparison(_hand_search(best_skill=0.01), "fcnn"))
    assert below.startswith("No evidence here") and "0.010, is below 0.05" in below
    lost = trend_sentence(experiment3_comparison(_hand_search(best_nll=0.55, base_skill=0.01), "fcnn"))
    assert lost.startswith("No evidence here")
    assert "not stored" in trend_sentence(experiment3_comparison(_hand_search(base_skill=math.nan), "fcnn"))
    # a comparison made before it carried the skill: not known to beat a constant
    comp = experiment3_comparison(_hand_search(), "fcnn")
    assert "not stored" in trend_sentence(comp[comp["quantity"] != SKILL_QUANTITY])
    # a group l1/l2 student's win is no evidence for its advantages, whatever its skill
    won = trend_sentence(experiment3_comparison(_hand_search(best_method="group_lasso", best_skill=0.01), "fcnn"))
    assert won.startswith("No evidence here: the best searched student is a group l1/l2 + pruning student")


# ----------------------------------------------------------------------------- end to end
def small_config(num_iterations: int = 900, burn_in: int = 200, log_every: int = 300) -> GPEDConfig:
    return GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=num_iterations,
                      burn_in=burn_in, eval_thinning=10, log_every=log_every, checkpoint_every=log_every,
                      progress=False, device="cpu")


def small_task(data) -> ChainTask:
    students = search_students("fcnn", [0.05, 1], [0.05, 1], [1e-3, 1e-2], thinning={"predictive": 2})
    return ChainTask(data, small_config(), students)


def no_chain(*args, **kwargs):
    raise AssertionError("the chain was asked for although the search is stored")


@pytest.fixture(scope="module")
def searched(digits_data, tmp_path_factory):
    store = ResultsStore(tmp_path_factory.mktemp("exp3"))
    task = small_task(digits_data)
    settings = SearchSettings(finetune_epochs=10.0, latency_batch_size=16, latency_repeats=2)
    first = run_experiment3(task, settings, store, progress=False)
    with pytest.MonkeyPatch.context() as mp:  # a stored search never touches the chain
        mp.setattr(chains_module, "run_chains", no_chain)
        again = run_experiment3(task, settings, store, progress=False)
    # other search settings: a new search entry, from the stored chain's checkpoint (not run again)
    other = run_experiment3(task, SearchSettings(finetune_epochs=10.0, latency_batch_size=16, latency_repeats=1),
                            store, progress=False)
    return first, again, other, store, task


def test_search_table_rows_and_costs(searched):
    first, _, _, store, _ = searched
    t = first.table
    assert (first.status, first.chain_status, first.error) == (Status.RAN, Status.RAN, "")
    counts = t.groupby(["method", "stage"]).size().to_dict()
    assert counts == {("teacher", "teacher"): 1, ("exhaustive", "distilled"): 4, ("group_lasso", "distilled"): 2,
                      ("group_lasso", "pruned"): 2, ("group_lasso", "fine-tuned"): 2}
    assert t[t["is_base"].astype(bool)]["student"].tolist() == ["predictive-U_s-K1x1"]  # U_s, as the paper
    assert not t["student"].str.startswith("companion").any()  # the U_o companion is not a candidate
    assert (t["flops"] > 0).all() and (t["params"] > 0).all() and (t["latency_ms"] > 0).all()
    pruned = t[t["stage"] == "pruned"]
    assert (pruned["prune_check_max_abs_diff"] < 1e-5).all()
    strong = t[(t["method"] == "group_lasso") & (t["reg_weight"] == 1e-2)]
    assert strong.set_index("stage").loc["pruned", "params"] < strong.set_index("stage").loc["distilled", "params"]
    assert (t[t["stage"] == "fine-tuned"]["finetune_steps"] == round(10 * 1200 / 50 / 2)).all()
    assert (t[t["stage"] == "fine-tuned"]["finetune_lr"] == 1e-4).all()  # Appendix A.2, FCNN
    tuned = t[t["stage"] == "fine-tuned"]
    assert (tuned["student_accuracy"] > 0.7).all() and tuned["student_nll"].notna().all()
    assert len(search_candidates(t)) == 6 and len(search_candidates(t, "group_lasso")) == 2
    assert t["run_key"].nunique() == 1 and (t["chain_seconds"] > 0).all() and (t["search_seconds"] > 0).all()
    teacher = t[t["method"] == "teacher"].iloc[0]
    # one teacher sample every 10 steps t with B < t < T: t = 210, ..., 890
    assert teacher["teacher_samples"] == 69 and teacher["params"] == count_parameters(
        build_network("fcnn", (1, 8, 8), 10))
    # the search entry holds the table and its record; no networks are kept
    assert first.run_dir.parent.name == "search" and (first.run_dir / "search.csv").exists()
    assert store.entry("chain", first.entry.record["chain"]).key == t["run_key"].iloc[0]
    assert not list(first.run_dir.glob("*.pt"))


def test_search_reuses_the_stored_table(searched):
    first, again, other, store, _ = searched
    assert (again.status, again.chain_status) == (Status.REUSED, Status.REUSED)  # the chain not even loaded
    assert again.entry.key == first.entry.key
    pd.testing.assert_frame_equal(again.table, first.table)
    # another latency setting is another search of the same chain, whose state came from its checkpoint
    assert (other.status, other.chain_status) == (Status.RAN, Status.REUSED) and other.entry.key != first.entry.key
    cols = ["student", "stage", "student_nll", "params", "units_removed"]
    pd.testing.assert_frame_equal(other.table[[c for c in cols]], first.table[cols])
    stored = load_search_results(store)
    assert len(stored) == 2 * len(first.table) and set(stored["entry"]) == {first.entry.key, other.entry.key}
    assert load_search_results(ResultsStore(store.root / "absent")).empty
    assert load_search_results(store, code="chain=0,search=0").empty  # another numerics' searches are not read
    with pytest.raises(TypeError, match="ResultsStore"):
        load_search_results(store.root)


def test_evaluate_student_reproduces_the_engine_metrics(searched):
    first, _, _, store, task = searched
    outcome = run_chains([task], store, requires_state=True, progress=False).outcomes[0]
    assert outcome.status == Status.REUSED and outcome.entry.key == first.table["run_key"].iloc[0]
    result = outcome.result
    rows = first.table[first.table["stage"] == "distilled"].set_index("student")
    summary = result.summary.set_index("student")
    for s in result.spec.students:
        ours = evaluate_student(result.student_network(s.label), result.spec, s.target, result.teacher_outputs["test"])
        assert ours["student_nll"] == pytest.approx(summary.loc[s.label, "student_nll"], rel=1e-6)
        assert ours["nll_gap"] == pytest.approx(summary.loc[s.label, "nll_gap"], rel=1e-6, abs=1e-9)
        if s.label in rows.index:  # the U_o companion is not in the search table
            assert ours["student_nll"] == pytest.approx(rows.loc[s.label, "student_nll"], rel=1e-6)


def test_comparison_and_frontiers_on_the_search(searched):
    first, _, _, store, _ = searched
    t = first.table
    front = frontier_table(t, "student_nll", "flops")
    assert set(front["front"]) == {"exhaustive", "group_lasso", "both"}
    for _, rows in front.groupby("front"):  # a frontier improves as the cost grows
        assert rows["flops"].is_monotonic_increasing and rows["student_nll"].is_monotonic_decreasing
    best = best_student(t, "student_nll")
    assert best["student_nll"] == search_candidates(t)["student_nll"].min()
    base = base_student(t, "predictive")
    comp = experiment3_comparison(t, "fcnn", "student_nll").set_index("quantity")
    assert comp.loc["best / base parameters", "paper"] == 9.9 and comp.loc["best / base FLOPs", "paper"] == 10
    assert comp.loc["best / base parameters", "ours"] == pytest.approx(best["params"] / base["params"])
    assert comp.loc["base student test NLL", "ours"] == pytest.approx(base["student_nll"])
    beats = bool(best["student_nll"] < base["student_nll"])
    assert comp.loc["a searched student beats the base student", "ours"] == beats
    sentence = trend_sentence(comp.reset_index())
    by_group = comp.loc["best student found by", "ours"] == "group l1/l2 + pruning"
    assert sentence.startswith(("No evidence" if by_group else "Yes") if beats else "No: ")
    # the README's rule without a fair comparison: a grid student's win is a yes, a group l1/l2 student's none
    won = comp.copy()
    won.loc["a searched student beats the base student", "ours"] = True
    for method, start in (("exhaustive search", "Yes: "), ("group l1/l2 + pruning", "No evidence here: ")):
        won.loc["best student found by", "ours"] = method
        assert trend_sentence(won.reset_index()).startswith(start)
    assert trend_sentence(experiment3_comparison(t.iloc[:0], "fcnn")).startswith("No search results")


def test_missing_data_and_bad_arguments(tmp_path):
    store = ResultsStore(tmp_path / "results")
    p = resolve_settings(PROFILES, "default", {})
    task = experiment3_task("cnn_cifar10", p, device="cpu", data_root=str(tmp_path / "no-data"), target="predictive")
    res = run_experiment3(task, p.search_settings(), store, progress=False)
    assert (res.status, res.entry, res.run_dir) == (Status.MISSING_DATA, None, None) and res.table.empty
    assert "cifar10" in res.error and not (tmp_path / "results").exists()
    with pytest.raises(TypeError, match="SearchSettings"):
        run_experiment3(task, p, store)
    with pytest.raises(TypeError, match="ChainTask"):
        run_experiment3("cnn_cifar10", p.search_settings(), store)


@pytest.fixture(scope="module")
def searched_two_targets(digits_data, tmp_path_factory):
    """A small FCNN search with predictive AND expected-entropy students on one chain (search_students
    allows it; the notebook's profiles run one chain per target, experiment3_tasks)."""
    store = ResultsStore(tmp_path_factory.mktemp("exp3_targets"))
    students = search_students("fcnn", [0.05, 1], [1], [1e-2], targets=("predictive", "entropy"),
                               thinning={"predictive": 2, "entropy": 2})
    settings = SearchSettings(finetune_epochs=2.0, latency_batch_size=8, latency_repeats=1)
    task = ChainTask(digits_data, small_config(num_iterations=400, burn_in=100, log_every=200), students)
    return run_experiment3(task, settings, store, progress=False)


def test_entropy_students_are_searched_pruned_and_compared(searched_two_targets):
    t = searched_two_targets.table
    assert set(t.loc[t["method"] != "teacher", "target"]) == {"predictive", "entropy"}
    entropy = search_candidates(t)[lambda d: d["target"] == "entropy"]
    assert sorted(entropy["method"]) == ["exhaustive", "exhaustive", "group_lasso"]
    assert entropy["entropy_mae"].notna().all() and (entropy["entropy_mae"] >= 0).all()
    stages = t[(t["target"] == "entropy") & (t["method"] == "group_lasso")]["stage"].tolist()
    assert stages == ["distilled", "pruned", "fine-tuned"]
    comp = experiment3_comparison(t, "fcnn", "entropy_mae").set_index("quantity")
    assert set(comp["figure"]) == {"Figure 10"}
    assert comp.loc["base student expected-entropy MAE", "ours"] == pytest.approx(
        base_student(t, "entropy")["entropy_mae"])


def test_figure_availability_says_why_each_figure_is_missing(searched_two_targets):
    missing = SearchResult("cnn_cifar10", pd.DataFrame(), Status.MISSING_DATA, "data set 'cifar10' (train) not found")
    results = {"fcnn": searched_two_targets, "cnn_cifar10": missing}
    both = figure_availability(results, ["predictive", "entropy"], "default").set_index("figure")
    assert both.index.tolist() == [f"Figure {n}" for n in (2, 6, 7, 8, 9, 10, 11, 12, 13)]
    assert both.loc[["Figure 8", "Figure 9", "Figure 10"], "produced"].all()
    assert (both.loc[["Figure 8", "Figure 9", "Figure 10"], "reason"] == "").all()
    assert not both.loc[["Figure 2", "Figure 6", "Figure 7", "Figure 11", "Figure 12", "Figure 13"], "produced"].any()
    reason = both["reason"]
    assert "cnn_mnist is not among the models of the 'default' profile (fcnn, cnn_cifar10)" in reason["Figure 7"]
    assert "the cifar10 data set is absent here" in both.loc["Figure 13", "reason"]
    predictive = figure_availability(results, ["predictive"]).set_index("figure")
    assert predictive.loc[["Figure 8", "Figure 9"], "produced"].all()
    assert not predictive.loc["Figure 10", "produced"]
    reason = predictive.loc["Figure 10", "reason"]
    assert "the entropy target is not distilled in this run (targets ['predictive'])" in reason
    # targets asked for but absent from the table (e.g. a table stored by another profile), and a failed search
    only_pred = SearchResult("fcnn", searched_two_targets.table[lambda d: d["target"] != "entropy"], Status.REUSED)
    stale = figure_availability({"fcnn": only_pred}, ["predictive", "entropy"]).set_index("figure")
    reason = stale.loc["Figure 10", "reason"]
    assert "the table has no expected-entropy MAE for any searched entropy student of fcnn" in reason
    failed = figure_availability({"fcnn": SearchResult("fcnn", pd.DataFrame(), Status.FAILED, "boom\nmore")},
                                 ["predictive"]).set_index("figure")
    assert failed.loc["Figure 9", "reason"] == "not produced: the fcnn search has no results (status 'failed': boom)"


def test_merged_search_stacks_one_models_targets(searched_two_targets):
    t = searched_two_targets.table
    pred = SearchResult("fcnn", t[t["target"] != "entropy"], Status.REUSED, entry=searched_two_targets.entry,
                        seconds=1.0, chain_status="", target="predictive")
    ent = SearchResult("fcnn", t[t["target"] == "entropy"], Status.RAN, seconds=2.0, chain_status=Status.RAN,
                       target="entropy")
    both = merged_search([pred, ent])
    assert (both.status, both.seconds, both.chain_status) == (Status.RAN, 3.0, Status.RAN)
    assert both.target == "predictive+entropy"
    assert len(both.table) == len(t) and both.entry is pred.entry
    assert merged_search([pred]) is pred
    missing = SearchResult("fcnn", pd.DataFrame(), Status.MISSING_DATA, "no data", target="entropy")
    merged = merged_search([pred, missing])
    assert (merged.status, merged.error) == (Status.MISSING_DATA, "no data")
    with pytest.raises(ValueError, match="one model"):
        merged_search([pred, SearchResult("cnn_mnist", pd.DataFrame(), Status.RAN)])
    with pytest.raises(ValueError, match="one model"):
        merged_search([])


def test_result_lines_lead_with_both_targets_beside_the_papers_ratios(searched_two_targets):
    t = searched_two_targets.table
    lines = result_lines({"fcnn": t})
    nll = next(line for line in lines if line.startswith("- fcnn, test NLL"))
    mae = next(line for line in lines if line.startswith("- fcnn, expected-entropy MAE"))
    assert "(Figure 9; the paper's best: 9.9x / 10x)" in nll and "(Figure 10; the paper's best: 4.2x / 4.2x)" in mae
    base, best = base_student(t, "entropy"), best_student(t[t["target"] == "entropy"], "entropy_mae")
    assert f"base student {base['entropy_mae']:.4f}" in mae and f"{best['entropy_mae']:.4f}, with" in mae
    assert f"{best['params'] / base['params']:.1f}x the base student's parameters" in mae
    assert any(line.startswith("  Pruned students at <= 50%") for line in lines)
    assert result_lines({"fcnn": t[t["target"] != "entropy"]}, ["entropy_mae"]) == []
    with pytest.raises(ValueError, match="metric='mse' is not known"):
        result_lines({"fcnn": t}, ["mse"])

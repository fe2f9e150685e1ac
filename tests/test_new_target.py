"""Adding a target is one definition: a target written here, and nowhere else in the kit, is
distilled and its own metrics appear in a run's summary and history."""

import numpy as np
import pytest
import torch

from gped_kit.core import losses, metrics
from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.targets import HEADS, CustomMetrics, MetricInputs, Target, custom_target, identity_head, softmax_head
from gped_kit.engine import GPEDConfig, StudentConfig, distill
from gped_kit.engine import engine as engine_module


def top_class_probability(log_probs: torch.Tensor) -> torch.Tensor:
    """g = max_y p(y|x, theta): the teacher sample's confidence, (B, 1)."""
    return log_probs.exp().max(dim=-1, keepdim=True).values


def confidence_metrics(inputs: MetricInputs) -> dict[str, float]:
    out = {"confidence_mean": float(inputs.output.mean())}
    if inputs.reference is not None:
        out["confidence_mae"] = metrics.mae(inputs.output, inputs.reference)
    return out


CONFIDENCE = Target("confidence", top_class_probability, out_dim=lambda c: 1, link=torch.sigmoid,
                    loss=lambda target, raw: losses.squared_error(target, torch.sigmoid(raw)),
                    metrics=CustomMetrics(("confidence_mean", "confidence_mae"), confidence_metrics))


def test_a_target_defined_in_one_place_reports_its_metrics(digits_data):
    config = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=300,
                        burn_in=100, eval_thinning=10, log_every=100, progress=False, device="cpu")
    result = distill(digits_data, config, [StudentConfig(CONFIDENCE, "U_o", thinning=2),
                                           StudentConfig("predictive", "U_s", thinning=2)])
    s = result.summary.set_index("student")
    assert CONFIDENCE.reports("confidence_mae") and not CONFIDENCE.reports("student_nll")
    student = result.student_outputs["test"]["confidence-U_o"]
    teacher = result.teacher_outputs["test"]["confidence"]  # the ensemble tracks the new target's E[g] too
    assert s.loc["confidence-U_o", "confidence_mae"] == metrics.mae(student, teacher)
    assert s.loc["confidence-U_o", "confidence_mean"] == float(student.mean())
    assert 0.0 < s.loc["confidence-U_o", "confidence_mae"] < 0.3
    # the built-in student's row is unchanged by the new target: it has no confidence metrics
    assert s["confidence_mae"].isna()["predictive-U_s"] and s.loc["predictive-U_s", "student_nll"] > 0
    history = result.history[result.history["student"] == "confidence-U_o"]
    assert history["confidence_mae"].notna().sum() == 2  # the log points after burn-in: steps 200 and 300


def test_a_custom_target_of_the_wrong_width_is_refused_before_any_step(digits_data, monkeypatch):
    """A g whose width is not the declared ``out_dim`` fails when the run is set up, naming the target, its
    student, the width g returned and the declared one, not steps into the run (inside ``index_add``)."""
    import gped_kit as gk
    from gped_kit.engine import engine as engine_module

    batches = []

    def two_columns(log_probs: torch.Tensor) -> torch.Tensor:  # declared below as width 1
        batches.append(log_probs.shape[0])
        return log_probs.exp()[:, :2]

    def no_step(*args, **kwargs):
        raise AssertionError("a sampling step ran")

    monkeypatch.setattr(engine_module.GPEDEngine, "step", no_step)
    wrong = gk.custom_target("top_two", two_columns, out_dim=1)
    config = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=30,
                        burn_in=10, eval_thinning=10, log_every=10, progress=False, device="cpu")
    with pytest.raises(ValueError) as caught:
        gk.distill(digits_data, config, [StudentConfig(wrong, "U_o", thinning=2)])
    message = str(caught.value)
    assert "target 'top_two' (student 'top_two-U_o')" in message
    assert "shape (3, 2), width 2" in message and "declares width 1" in message
    assert "out_dim" in message
    assert batches == [3]  # g ran once, on the check's 3 inputs: no sampling step, no distillation step

    def flat(log_probs: torch.Tensor) -> torch.Tensor:  # (B,), not (B, 1)
        return log_probs.exp().max(dim=-1).values

    with pytest.raises(ValueError, match=r"target 'flat' \(student 'flat-U_s'\): its g returned shape \(3,\), "
                                         r"not \(batch, width\).*declares width 1"):
        gk.distill(digits_data, config, [StudentConfig(gk.custom_target("flat", flat, out_dim=1), "U_s")])


SHORT = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=30, burn_in=10,
                   eval_thinning=10, log_every=10, progress=False, device="cpu")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")], ids=["nan", "inf", "-inf"])
def test_a_custom_target_whose_g_is_not_finite_is_refused_before_any_step(digits_data, monkeypatch, value):
    """A g returning NaN or infinity fails when the run is set up, naming the target, its student and how many
    of the probe's values are not finite, not steps into the run as a divergence blamed on the learning rate."""
    def no_step(*args, **kwargs):
        raise AssertionError("a sampling step ran")

    monkeypatch.setattr(engine_module.GPEDEngine, "step", no_step)
    everywhere = custom_target("nan_g", lambda lp: torch.full((lp.shape[0], 2), value), 2)
    with pytest.raises(ValueError, match=r"target 'nan_g' \(student 'nan_g-U_o'\): its g returned NaN or infinite "
                                         r"values on the teacher's statistics of the first 3 training inputs "
                                         r"\(6 of 6 values"):
        distill(digits_data, SHORT, [StudentConfig(everywhere, "U_o", thinning=2)])

    def one_bad(log_probs: torch.Tensor) -> torch.Tensor:
        out = log_probs.exp()[:, :2].clone()
        out[1, 0] = value
        return out

    with pytest.raises(ValueError, match=r"target 'one_bad' \(student 'one_bad-U_s'\): its g returned NaN or "
                                         r"infinite values .*\(1 of 6 values"):
        distill(digits_data, SHORT, [StudentConfig(custom_target("one_bad", one_bad, 2), "U_s", thinning=2)])


def test_a_student_diverging_on_its_targets_values_names_them_as_a_cause(digits_data):
    """A g finite on the setup probe's 3 inputs but NaN on others passes setup; the student's divergence then
    names non-finite target values as a cause besides the learning rate (the message's start is unchanged)."""
    late = custom_target("late_nan", lambda lp: lp.exp() * (1.0 if lp.shape[0] <= 3 else float("nan")),
                         lambda c: c)
    with pytest.raises(FloatingPointError, match=r"student 'late_nan-U_s' diverged before step 20 \(training loss "
                                                 r"nan\); lower its lr=0.001, or look for non-finite target values "
                                                 r"\(a target's g returning NaN or infinity on some inputs; this "
                                                 r"student's target is 'late_nan'\)"):
        distill(digits_data, SHORT, [StudentConfig(late, "U_s", thinning=2)])


@pytest.mark.parametrize("options, error, match", [
    (dict(out_dim=0), ValueError, r"custom_target out_dim=0 is not allowed; allowed: an integer >= 1"),
    (dict(out_dim=-1), ValueError, r"custom_target out_dim=-1 is not allowed; allowed: an integer >= 1"),
    (dict(out_dim=2.5), TypeError, r"custom_target out_dim=2.5 is not allowed; allowed: an integer >= 1 .* or a "
                                   r"callable C -> D"),
    (dict(out_dim="2"), TypeError, r"custom_target out_dim='2' is not allowed"),
    (dict(out_dim=True), TypeError, r"custom_target out_dim=True is not allowed"),
    (dict(out_dim=2, link="softmx"), ValueError, r"custom_target link='softmx' is not allowed; allowed: a callable "
                                                 r"raw -> prediction or a built-in head's name \['dirichlet', "),
    (dict(out_dim=2, link=3), TypeError, r"custom_target link=3 is not allowed; allowed: a callable"),
    (dict(out_dim=2, loss="squared"), TypeError, r"custom_target loss='squared' is not allowed; allowed: a "
                                                 r"callable \(target, raw\) -> \(B,\)"),
], ids=["zero", "negative", "float", "str", "bool", "unknown-head", "link-int", "loss-str"])
def test_custom_target_refuses_a_bad_out_dim_link_or_loss_when_made(options, error, match):
    with pytest.raises(error, match=match):
        custom_target("bad", top_class_probability, **options)


def test_custom_target_takes_an_integer_width_a_callable_one_and_a_heads_name():
    assert custom_target("w", top_class_probability, 1).out_dim(10) == 1
    assert custom_target("w", top_class_probability, np.int64(3)).out_dim(10) == 3
    assert custom_target("w", top_class_probability, lambda c: c + 1).out_dim(10) == 11
    named = custom_target("soft", top_class_probability, 1, link="softmax")
    assert named.link is HEADS["softmax"] is softmax_head
    raw, target = torch.randn(4, 5), torch.softmax(torch.randn(4, 5), -1)
    assert torch.equal(named.loss(target, raw), losses.squared_error(target, softmax_head(raw)))  # the default loss
    assert custom_target("plain", top_class_probability, 1).link is identity_head

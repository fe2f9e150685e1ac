"""Adding a target is one definition: a target written here, and nowhere else in the kit, is
distilled and its own metrics appear in a run's summary and history."""

import pytest
import torch

from gped_kit.core import losses, metrics
from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.targets import CustomMetrics, MetricInputs, Target
from gped_kit.engine import GPEDConfig, StudentConfig, distill


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

"""Adding a target is one definition: a target written here, and nowhere else in the kit, is
distilled and its own metrics appear in a run's summary and history."""

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

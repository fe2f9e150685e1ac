"""A distilled student as a model (gped_kit.engine.distilled): predict, decompose, save, load."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gped_kit as gk
from gped_kit.core.likelihoods import regression_moments
from gped_kit.core.metrics import predictive_entropy
from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.targets import PREDICTIVE, custom_target, predictive_g
from gped_kit.data.container import GPEDData
from gped_kit.engine import GPEDConfig, StudentConfig, distill
from gped_kit.engine.distilled import DistilledModel, load
from gped_kit.models.presets import ArchSpec

STUDENTS = [StudentConfig("predictive", "U_s", thinning=2),
            StudentConfig("predictive+entropy", "U_o", thinning=2, arch=ArchSpec("fcnn", 0.5, 0.5))]


@pytest.fixture(scope="module")
def result(digits_data):
    config = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=300,
                        burn_in=100, eval_thinning=10, log_every=300, progress=False, device="cpu")
    return distill(digits_data, config, STUDENTS)


def test_predict_gives_the_runs_outputs_and_their_decomposition(result, digits_data):
    x = digits_data.test_x
    for label in result.labels:
        model = result.model(label)
        prediction = model.predict(x, batch_size=37)  # chunks that do not divide the set
        torch.testing.assert_close(prediction.output, result.student_outputs["test"][label], rtol=1e-5, atol=1e-6)
        probs = prediction.probabilities
        torch.testing.assert_close(probs.sum(-1), torch.ones(len(x)), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(prediction.total, predictive_entropy(probs))
    both = result.model("predictive+entropy-U_o-K0.5x0.5").predict(x)
    u = result.target("predictive+entropy-U_o-K0.5x0.5").uncertainties(both.output, 10)
    assert torch.equal(both.data, u.data) and torch.equal(both.knowledge, both.total - both.data)
    only = result.model("predictive-U_s").predict(x)
    assert only.data is None and only.knowledge is None  # a predictive student does not learn E[H]
    frame = both.to_frame()
    assert list(frame.columns) == ["prediction", "probability", "total", "data", "knowledge"] and len(frame) == len(x)
    assert (frame["prediction"].to_numpy() == both.probabilities.argmax(-1).numpy()).all()


def test_save_and_load_give_the_same_predictions_and_never_overwrite(result, digits_data, tmp_path):
    model = result.model("predictive+entropy-U_o-K0.5x0.5")
    assert model.architecture == ArchSpec("fcnn", 0.5, 0.5)
    path = model.save(tmp_path / "student.pt")
    again = gk.load_model(path)
    assert isinstance(again, DistilledModel) and again.target.name == "predictive+entropy"
    assert torch.equal(again.predict(digits_data.test_x).output, model.predict(digits_data.test_x).output)
    with pytest.raises(FileExistsError, match="student.pt exists"):
        model.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["student.pt"]  # no temporary file left behind
    with pytest.raises(FileNotFoundError, match="no saved model"):
        load(tmp_path / "missing.pt")
    (tmp_path / "other.pt").write_bytes(b"not a model")
    with pytest.raises(Exception):
        load(tmp_path / "other.pt")
    with pytest.raises(ValueError, match=r"inputs of shape \(3, 64\); this model takes \(N, 1, 8, 8\)"):
        model.predict(torch.zeros(3, 64))


@pytest.mark.filterwarnings("ignore::gped_kit.core.targets.SkillWarning")  # 60 steps: the student learns little
def test_a_users_network_and_target_must_be_given_back_to_load(digits_data, tmp_path):
    def net(out: int) -> nn.Module:
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, out))

    probs = custom_target("probs", predictive_g, out_dim=lambda c: c)
    config = GPEDConfig(model=net, sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=60, burn_in=20,
                        eval_thinning=10, log_every=60, progress=False, device="cpu")
    res = distill(digits_data, config, [StudentConfig(probs, "U_s", thinning=2)])
    model = res.model(res.labels[0])
    assert model.architecture is None
    path = model.save(tmp_path / "custom.pt")
    with pytest.raises(ValueError, match="target 'probs', which is not built in; pass target="):
        load(path)
    with pytest.raises(ValueError, match="not one of the kit's architectures; pass network="):
        load(path, target=probs)
    with pytest.raises(ValueError, match="target= is 'predictive'"):
        load(path, network=net, target=PREDICTIVE)
    loaded = load(path, network=net, target=probs)
    assert torch.equal(loaded.predict(digits_data.test_x).output, model.predict(digits_data.test_x).output)
    with pytest.raises(ValueError, match="does not match the weights"):
        load(path, network=lambda out: nn.Sequential(nn.Flatten(), nn.Linear(64, out)), target=probs)


def test_a_regression_student_predicts_its_mean_and_both_variances():
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(200, 1, generator=gen) * 4 - 2
    y = torch.sin(x[:, 0]) + 0.2 * torch.randn(200, generator=gen)
    data = GPEDData.from_tensors((x, y), (x, y))

    def net(out: int) -> nn.Module:
        return nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, out))

    config = GPEDConfig(model=net, likelihood="gaussian", sampler=SGLDConfig(step_size=2e-5, prior_precision=1.0,
                                                                             batch_size=50),
                        num_iterations=200, burn_in=50, eval_thinning=10, log_every=200, progress=False, device="cpu")
    res = distill(data, config, [StudentConfig("predictive_variance", "U_o", arch=net, thinning=1, batch_size=50)])
    prediction = res.model(res.labels[0]).predict(x)
    expected = regression_moments(res.student_outputs["test"][res.labels[0]])
    torch.testing.assert_close(prediction.mean, expected.mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(prediction.epistemic, expected.epistemic, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(prediction.aleatoric, expected.aleatoric, rtol=1e-5, atol=1e-6)
    assert prediction.probabilities is None and list(prediction.to_frame().columns) == ["mean_0", "aleatoric_0",
                                                                                         "epistemic_0"]

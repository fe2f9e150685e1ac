"""Uncertainty decomposition: exact identities, the Dirichlet closed forms against Monte Carlo."""

import math

import pytest
import torch

from gped_kit.baselines.endd import ENDD
from gped_kit.core import uncertainty as U
from gped_kit.core.targets import PREDICTIVE, PREDICTIVE_ENTROPY, dirichlet_head, softmax_exp_head


def test_from_samples_identities_on_a_hand_made_ensemble():
    # two members that disagree completely on input 0, agree on input 1
    probs = torch.tensor([[[1.0, 0.0], [0.5, 0.5]],
                          [[0.0, 1.0], [0.5, 0.5]]])
    u = U.from_samples(probs)
    assert torch.allclose(u.predictive, torch.tensor([[0.5, 0.5], [0.5, 0.5]]))
    assert torch.allclose(u.total, torch.full((2,), math.log(2)))
    # input 0: every member is certain -> all uncertainty is knowledge; input 1: all is data
    assert torch.allclose(u.data, torch.tensor([0.0, math.log(2)]), atol=1e-7)
    assert torch.allclose(u.knowledge, torch.tensor([math.log(2), 0.0]), atol=1e-7)
    assert torch.equal(u.get("knowledge"), u.knowledge) and u[0:1].total.shape == (1,)


def test_knowledge_is_a_nonnegative_mutual_information_for_any_ensemble():
    probs = torch.softmax(3 * torch.randn(7, 50, 5, generator=torch.Generator().manual_seed(0)), -1)
    u = U.from_samples(probs)
    assert (u.knowledge >= -1e-6).all() and (u.data >= 0).all()
    assert torch.allclose(u.total, u.data + u.knowledge)


@pytest.mark.parametrize("alpha", [[1.0, 1.0, 1.0], [0.3, 2.0, 5.0], [20.0, 1.0, 0.5, 0.5], [100.0, 100.0]])
def test_dirichlet_closed_forms_match_monte_carlo(alpha):
    alpha = torch.tensor([alpha], dtype=torch.float64)
    u = U.from_dirichlet(alpha)
    pi = torch.distributions.Dirichlet(alpha[0]).sample((400_000,))
    mc = U.from_samples(pi[:, None, :])
    assert torch.allclose(u.predictive, mc.predictive, atol=3e-3)
    assert torch.allclose(u.data, mc.data, atol=5e-3)
    assert torch.allclose(u.knowledge, mc.knowledge, atol=5e-3)


def test_flat_dirichlet_expected_entropy_known_value():
    # E[H] under Dir(1,1) (uniform p on [0,1]) is the mean of -p log p - (1-p) log(1-p) = 1/2
    assert U.dirichlet_expected_entropy(torch.tensor([[1.0, 1.0]])).item() == pytest.approx(0.5, abs=1e-6)


def test_student_uncertainties_come_from_the_targets_decomposition():
    raw = torch.randn(4, 4)
    gped = PREDICTIVE_ENTROPY.uncertainties(softmax_exp_head(raw), 3)
    assert torch.allclose(gped.predictive, torch.softmax(raw[:, :3], -1)) and torch.allclose(gped.data, raw[:, 3].exp())
    assert torch.equal(U.from_predictive_entropy_output(softmax_exp_head(raw), 3).data, gped.data)
    endd = ENDD.uncertainties(dirichlet_head(raw), 4)
    ref = U.from_dirichlet(raw.exp())
    assert torch.allclose(endd.data, ref.data, atol=1e-5) and torch.allclose(endd.predictive, ref.predictive)
    assert PREDICTIVE_ENTROPY.has_uncertainties and ENDD.has_uncertainties and not PREDICTIVE.has_uncertainties
    with pytest.raises(ValueError, match="'predictive' carries no uncertainty decomposition"):
        PREDICTIVE.uncertainties(torch.rand(4, 4), 3)
    with pytest.raises(ValueError, match=r"shape \(N, 4\)"):
        PREDICTIVE_ENTROPY.uncertainties(torch.rand(4, 3), 3)
    with pytest.raises(ValueError, match=r"shape \(N, 4\)"):
        ENDD.uncertainties(torch.rand(4, 3), 3)
    with pytest.raises(ValueError, match="allowed"):
        U.Uncertainties(torch.rand(2, 2), torch.rand(2), torch.rand(2)).get("epistemic")
    with pytest.raises(ValueError, match="> 0"):
        U.from_dirichlet(torch.tensor([[1.0, 0.0]]))


def test_endd_output_at_a_temperature_is_the_dirichlet_of_exp_raw_over_t():
    from gped_kit.baselines.endd import endd_output_at_temperature  # noqa: PLC0415

    raw = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 0.5], [6.0, -3.0, 1.0]])
    out = dirichlet_head(raw)  # alpha = exp(raw), the link's T = 1
    torch.testing.assert_close(endd_output_at_temperature(out, 3, 1.0), out)
    heated = endd_output_at_temperature(out, 3, 2.5)
    torch.testing.assert_close(heated, dirichlet_head(raw / 2.5))  # alpha = exp(raw / 2.5)
    # the heated mean is softmax(raw / T); the argmax is kept, the precision alpha_0 falls
    torch.testing.assert_close(heated[:, :3], torch.softmax(raw / 2.5, -1))
    assert torch.equal(heated[:, :3].argmax(-1), out[:, :3].argmax(-1)) and bool((heated[:, 3] < out[:, 3]).all())
    u1, u25 = ENDD.uncertainties(out, 3), ENDD.uncertainties(heated, 3)
    assert bool((u25.total >= u1.total - 1e-6).all()) and not torch.allclose(u25.knowledge, u1.knowledge)
    with pytest.raises(ValueError, match="temperature=0"):
        endd_output_at_temperature(out, 3, 0)
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        endd_output_at_temperature(out[:, :3], 3, 2.5)

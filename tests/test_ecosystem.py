"""gk.distill_samples on the ecosystem's posteriors: the examples of docs/ecosystem.md, run as written, distil a
laplace-torch Laplace approximation's samples and a `posteriors` SGHMC run's samples, and each student is checked
against the samples' own ensemble. Slow proofs (about 10 s each on one core; make test-slow, whose make venv-slow
installs the [ecosystem] extra); skipped with the reason where the package is absent."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from torch.func import functional_call
from torch.nn import functional as F
from torch.nn.utils import vector_to_parameters

pytestmark = pytest.mark.slow

DOC = Path(__file__).resolve().parents[1] / "docs" / "ecosystem.md"


def example(section: str) -> str:
    """The first ```python block under the heading '## <section>' of docs/ecosystem.md."""
    text = DOC.read_text()
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    blocks = re.findall(r"```python\n(.*?)```", text[start:end if end >= 0 else None], flags=re.DOTALL)
    assert blocks, f"docs/ecosystem.md: no python block under '## {section}'"
    return blocks[0]


def run_example(section: str) -> dict:
    """Run the section's block as a script would (its own namespace) and return that namespace."""
    namespace: dict = {"__name__": "__ecosystem_example__"}
    torch.manual_seed(0)
    exec(compile(example(section), f"docs/ecosystem.md ({section})", "exec"), namespace)
    return namespace


def ensemble_predictive(samples: list[dict[str, torch.Tensor]], network: torch.nn.Module,
                        x: torch.Tensor) -> torch.Tensor:
    """The samples' mean predictive at x, computed from the samples directly (not by the engine)."""
    with torch.no_grad():
        return torch.stack([functional_call(network, sample, (x,)).softmax(-1) for sample in samples]).mean(0)


def kl(p: torch.Tensor, q: torch.Tensor) -> float:
    """Mean over inputs of KL(p || q) for rows of class probabilities."""
    return float((p * (p.clamp_min(1e-12).log() - q.clamp_min(1e-12).log())).sum(-1).mean())


def check_student(ns: dict) -> dict:
    """The run's teacher is the samples' ensemble, and its student reproduces that ensemble's predictive
    far better than the best constant prediction. Returns the numbers (for the messages)."""
    samples, result, data, mlp = ns["samples"], ns["result"], ns["data"], ns["mlp"]
    assert len(samples) == 50
    x_test, y_test = data.test_x, data.test_y
    p = ensemble_predictive(samples, mlp(10), x_test)
    summary = result.summary.iloc[0]
    # the engine's teacher ensemble is exactly the samples' mean (eval_thinning=1: every visit counted)
    assert float(summary["teacher_nll"]) == pytest.approx(float(F.nll_loss(p.log(), y_test)), abs=1e-4)
    assert int(summary["offline_samples"]) == 50
    q = result.model(result.labels[0]).predict(x_test).probabilities
    numbers = {"kl_student": kl(p, q), "kl_constant": kl(p, p.mean(0, keepdim=True).expand_as(p)),
               "skill": float(summary["skill"]), "teacher_nll": float(summary["teacher_nll"]),
               "student_nll": float(summary["student_nll"])}
    assert numbers["kl_student"] < 0.1, numbers
    assert numbers["kl_student"] < 0.25 * numbers["kl_constant"], numbers
    assert numbers["skill"] > 0.5, numbers
    # the student predicts the labels about as well as the ensemble it distils
    assert abs(numbers["student_nll"] - numbers["teacher_nll"]) < 0.1, numbers
    return numbers


# laplace-torch warns that its own predictive's default link is probit; the examples do not use that predictive
@pytest.mark.filterwarnings("ignore:By default `link_approx` is `probit`:UserWarning")
def test_laplace_torch_posterior_distilled():
    pytest.importorskip("laplace", reason="laplace-torch is not installed (pip install '.[ecosystem]', "
                        "or make venv-slow)")
    ns = run_example("laplace-torch")
    print("laplace-torch:", check_student(ns))
    # A full-network Laplace gives its samples as one (S, P) tensor in parameters() order, taken as it is: the
    # run's teacher is again the samples' ensemble (its student, of 4 updates, is not checked: it warns).
    net, gk = ns["net"], ns["gk"]
    la = ns["Laplace"](net, "classification", subset_of_weights="all", hessian_structure="diag")
    la.fit(ns["train"])
    flat = la.sample(n_samples=4, generator=torch.Generator().manual_seed(1))
    assert flat.shape == (4, sum(v.numel() for v in net.parameters()))
    with pytest.warns(gk.core.targets.SkillWarning):
        result = gk.distill_samples(flat, ns["data"], ns["config"], [ns["student"]], passes=1)
    copy = ns["mlp"](10)
    rows = []
    for row in flat:
        vector_to_parameters(row, copy.parameters())
        rows.append({name: value.detach().clone() for name, value in copy.named_parameters()})
    p = ensemble_predictive(rows, copy, ns["data"].test_x)
    assert float(result.summary["teacher_nll"].iloc[0]) == pytest.approx(
        float(F.nll_loss(p.log(), ns["data"].test_y)), abs=1e-4)


def test_posteriors_sghmc_run_distilled():
    pytest.importorskip("posteriors", reason="posteriors is not installed (pip install '.[ecosystem]' or "
                        "'.[test]', or make venv)")
    print("posteriors:", check_student(run_example("posteriors")))

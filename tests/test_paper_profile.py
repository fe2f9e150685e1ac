"""The paper profile, executed: every notebook with a ``paper`` profile runs on the CPU with
``profile="paper"`` and only its iteration counts scaled down, so every code path of the paper
profile runs before anyone spends GPU hours on it (issue 15, item 5).

What is kept from the paper profile: every grid and list (labelled-set sizes, masks, models, the
width multipliers up to 4 (CNNs) and 5 (FCNN), the lambda grid, the thesis' data-set sizes), the
batching (``chains_per_batch="auto"``: batches as large as memory and the device's cap allow), the
students, thinnings H = 100 (predictive) / 10 (entropy, Experiment 4, the comparison), the
evaluation thinning, the S = 50 snapshots, step sizes, learning rates, dropout, OOD sets, nDCG trials.

What is scaled (each notebook's ``scaled_paper`` in :data:`gped_kit.experiments.registry.NOTEBOOKS`):

* the chains: T = 10^6 -> 101 with B = 1,000 / 10,000 -> 50, so that every event of Algorithm 1 happens
  at least once at the paper's H: the H = 100 students step once (t = 100), the H = 10 students five
  times (t = 60, ..., 100), the H = 1 student 50 times, the ensemble takes one sample (t = 100); the S = 50
  snapshots fit in the 51 post-burn-in steps. T = 300, B = 100 (the issue's example) gives the same
  events (one H = 100 step, one ensemble sample) at three times the teacher steps, which the 2-core CI
  machine cannot afford on top of the evaluations (below). Log and checkpoint intervals (10^4, 5 x 10^4)
  are left alone: both then happen at the last step only;
* notebook 10: T = 1,101 with the paper's B = 1,000 kept, because its warm-up candidate needs
  B >= its 1,000 warm-up steps;
* Experiment 3's fine-tuning: 600 epochs -> 0.3 with the lr halved every 0.1 (paper: 200) epochs:
  2 (predictive) / 18 (entropy) Adam steps with 1 / 2 halvings; latency timing 50 -> 2 repeats;
* the comparison's Hydra: 20,000 + 60,000 -> 200 + 600 steps; the spiral's chain 100,000 -> 1,000
  iterations (B 10,000 -> 100) and its Hydra 5,000 + 20,000 -> 50 + 200 steps;
* the thesis toys: S = 10,000 -> 1,000 samples (burn-in 1,000 -> 100) for both toys, M = 1,000 -> 100
  draws for batch EM, 5,000 -> 500 SGD iterations per logistic-regression student.

The notebooks run in a scratch copy with ONE results store shared by all of them (notebook 02 reuses
notebook 01's two N = 60,000, m = 0 chains), so the repository's ``results/`` and ``figures/`` are
untouched. Without CIFAR-10 under the data root (a download), its cells must report "missing data" and
the notebooks go on. Each test asserts that its notebook ran without error, that it recorded (and printed) the
check outcomes its entry's ``expected_checks`` gives, with their values, that every invariant it recorded
holds (:mod:`gped_kit.experiments.checks`, read from the scratch figures' manifest), and that the store holds
the entries of the paper grid (the entry's ``missing``: a complete chain entry per chain of the notebook, and
its derived results). The test is one loop over the registry: a new notebook with a paper profile is tested by
its entry alone.

Cost on the 2-core CPU machine (measured 2026-11-24, alone on the machine): 9.4 min for all nine
(565.7 s), of which notebook 02 (48 chains, two batches of 23) 224 s and 05 (one chain of 63 CNN-MNIST
and one of 85 FCNN students, the searches) 174 s; 07 61 s, 06 35 s, 10 24 s, 08 17 s, 00, 01 and 03
8-11 s each. What costs the time is not the chains but evaluating every student on the 10,000 test
images (at the last log point and again for the results), which no iteration count scales: notebook
05's 63 CNN-MNIST students are ~3 TFLOP per pass. Memory: the kernel of notebook 02 holds its batch's
data (23 labelled sets, 6 masked D' and test sets, each also in the engine's concatenated copy),
~12 GB RSS. Mark: ``paper_profile`` (deselect with ``-m "not paper_profile"``).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from gped_kit.cli.executors import LocalPapermillExecutor, NotebookRun, default_kernel_name
from gped_kit.experiments.artifacts import read_manifest
from gped_kit.experiments.frame import Experiment, absent_datasets
from gped_kit.experiments.registry import NOTEBOOKS
from gped_kit.experiments.store import ResultsStore

pytestmark = pytest.mark.paper_profile

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
PAPER = [entry for entry in NOTEBOOKS.values() if entry.scaled_paper is not None]
TIMES: dict[str, float] = {}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A copy of notebooks/ with one results store and one figures folder beside it."""
    root = tmp_path_factory.mktemp("paper_profile")
    shutil.copytree(NOTEBOOK_DIR, root / "notebooks")
    (root / "results").mkdir()
    (root / "figures").mkdir()
    return root


def run_paper(scratch: Path, entry: Experiment) -> str:
    """Execute the notebook with profile="paper" and its scaled counts; the text of its outputs."""
    parameters = {"profile": "paper", "results_dir": str(scratch / "results"),
                  "figures_dir": str(scratch / "figures"), **entry.scaled_paper}
    output = scratch / "executed" / f"{entry.name}.ipynb"
    output.parent.mkdir(exist_ok=True)
    executor = LocalPapermillExecutor(kernel_name=default_kernel_name(), progress="lines", timeout=3_600)
    started = time.perf_counter()
    executor.execute(NotebookRun(entry.path(scratch / "notebooks"), parameters, output, cwd=scratch / "notebooks"))
    TIMES[entry.name] = time.perf_counter() - started
    print(f"{entry.name}: {TIMES[entry.name]:.0f} s")
    texts = []
    for cell in json.loads(output.read_text())["cells"]:
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain", "")
            texts.append("".join(text) if isinstance(text, list) else str(text))
    return "\n".join(texts)


@pytest.mark.parametrize("entry", PAPER, ids=lambda entry: entry.name)
def test_paper_profile(scratch: Path, entry: Experiment) -> None:
    text = run_paper(scratch, entry)
    absent = absent_datasets()
    settings = entry.settings("paper", entry.scaled_paper)
    missing = entry.missing(ResultsStore(scratch / "results"), settings, absent)
    assert not missing, f"{entry.name}: the store lacks\n" + "\n".join(missing)
    outcomes = {o.statement: o for o in read_manifest(scratch / "figures").outcomes(entry.name, "paper")}
    for statement, value in entry.expected_checks(settings, absent).items():
        assert statement in outcomes, f"{entry.name} did not test {statement!r}"
        assert outcomes[statement].value == value, f"{entry.name}: {outcomes[statement].line} (expected {value})"
        assert outcomes[statement].line in text  # and printed it
    failed = [o.line for o in outcomes.values() if o.failed]
    assert not failed, f"{entry.name}: invariants not holding: {failed}"

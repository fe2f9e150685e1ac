"""Bad inputs through the public API that used to escape as raw errors (issue 25): each gives an
error of a stated type whose words name the cause, before any work where the input is known
before the run.

* integer labels outside ``[0, num_outputs)`` (were ``IndexError: Target 7 is out of bounds`` in torch);
* regression targets of the wrong shape (were a ``reshape`` error mid-run);
* NaN or infinity in any input or target of any set (was a divergence blamed on the step size);
* NaN made after the data were built (a transform applied in place): the divergence names the data;
* a user's network that outputs NaN or infinity (was a divergence blamed on the step size): named at setup;
* a corrupt checkpoint: the kit's sentence first, torch's error as ``__cause__`` (was one paragraph).
"""

import dataclasses
import pickle
import re

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from gped_kit.baselines import hydra as H
from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.status import Status
from gped_kit.data.container import GPEDData
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig, distill
from gped_kit.engine.checkpoint import CheckpointError
from gped_kit.engine.run import run_engine
from gped_kit.engine.spec import build_chain
from gped_kit.experiments.chains import ChainTask, run_chains
from gped_kit.experiments.store import ResultsStore


def config(**kw):
    base = dict(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=60, burn_in=10,
                eval_thinning=5, log_every=20, checkpoint_every=20, progress=False, device="cpu")
    return GPEDConfig(**{**base, **kw})


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if any sampling step runs."""
    def step(self):
        raise AssertionError("a sampling step ran before the error")
    monkeypatch.setattr(GPEDEngine, "step", step)


def regression_sets(n=40, features=3):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, features, generator=gen)
    return {"train": (x, x.sum(1)), "test": (x[:10].clone(), x[:10].sum(1)), "distill": x[10:].clone(),
            "ood": {"shifted": x[:5] + 3}}


# ----------------------------------------------------------------------------- labels and shapes
def test_labels_outside_num_outputs_name_the_set_the_range_and_num_outputs(digits_data):
    d = digits_data
    with pytest.raises(ValueError, match=r"train_y holds class labels from 5 to 14, but num_outputs=3 allows 0 to 2 "
                                         r"\(1200 label\(s\) outside\)"):
        GPEDData.from_tensors(train=(d.train_x, d.train_y + 5), test=(d.test_x, d.test_y), num_outputs=3)
    with pytest.raises(ValueError, match=r"train_y holds class labels from -1 to 8"):
        GPEDData.from_tensors(train=(d.train_x, d.train_y - 1), test=(d.test_x, d.test_y), num_outputs=10)
    # num_outputs inferred from D (max label + 1 = 10): a test label 10 is out of range
    test_y = d.test_y.clone()
    test_y[:4] = 10
    with pytest.raises(ValueError, match=r"test_y holds class labels from 0 to 10, but num_outputs=10 allows 0 to 9 "
                                         r"\(4 label\(s\) outside\)"):
        GPEDData.from_tensors(train=(d.train_x, d.train_y), test=(d.test_x, test_y))
    with pytest.raises(ValueError, match=r"train_y holds integer class labels, which must be a vector"):
        GPEDData(d.train_x, d.train_y[:, None], d.distill_x, d.test_x, d.test_y, 10)


@pytest.mark.parametrize("set_name, shape, num_outputs, match", [
    ("train", (40,), 3, r"train_y holds real-valued \(regression\) targets of shape \(40,\), but num_outputs=3 "
                        r"needs shape \(N, 3\)"),
    ("train", (40, 2), 3, r"train_y .* shape \(40, 2\), but num_outputs=3 needs shape \(N, 3\)"),
    ("train", (40, 1, 1), 1, r"train_y .* shape \(40, 1, 1\), but num_outputs=1 needs shape \(N, 1\) or \(N,\)"),
    ("test", (10, 2), 1, r"test_y .* shape \(10, 2\), but num_outputs=1"),
])
def test_regression_targets_of_the_wrong_shape_are_rejected(set_name, shape, num_outputs, match):
    sets = regression_sets()
    x, _ = sets[set_name]
    sets[set_name] = (x, torch.zeros(shape))
    with pytest.raises(ValueError, match=match):
        GPEDData.from_tensors(sets["train"], sets["test"], sets["distill"], num_outputs=num_outputs)


def test_regression_targets_of_the_right_shapes_are_accepted():
    sets = regression_sets()
    (x, y), (tx, ty) = sets["train"], sets["test"]
    assert GPEDData.from_tensors((x, y), (tx, ty)).num_outputs == 1
    assert GPEDData.from_tensors((x, y[:, None]), (tx, ty[:, None])).num_outputs == 1
    assert GPEDData.from_tensors((x, y[:, None].repeat(1, 3)), (tx, ty[:, None].repeat(1, 3))).num_outputs == 3


# ----------------------------------------------------------------------------- non-finite values
@pytest.mark.parametrize("where", ["train_x", "train_y", "distill_x", "test_x", "test_y", "ood_x['shifted']"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_values_in_any_set_are_rejected_with_the_set_and_count(where, value):
    sets = regression_sets()
    (x, y), (tx, ty), dx, ood = sets["train"], sets["test"], sets["distill"], sets["ood"]
    tensor = {"train_x": x, "train_y": y, "distill_x": dx, "test_x": tx, "test_y": ty,
              "ood_x['shifted']": ood["shifted"]}[where]
    tensor.view(-1)[[0, 2, 5]] = value
    with pytest.raises(ValueError, match=rf"non-finite values \(NaN or infinity\) in {re.escape(where)} \(3 values\); "
                                         r".*remove or impute them"):
        GPEDData.from_tensors((x, y), (tx, ty), dx, ood)


def test_every_set_with_non_finite_values_is_named_once_even_when_d_prime_is_d():
    sets = regression_sets()
    (x, y), (tx, ty) = sets["train"], sets["test"]
    x[0, 0], tx[1, 1] = float("nan"), float("inf")
    with pytest.raises(ValueError, match=r"in train_x \(1 value\), distill_x \(1 value\), test_x \(1 value\);"):
        GPEDData.from_tensors((x, y), (tx, ty))  # D' defaults to D's inputs: the same tensor


def test_count_is_exact_when_a_finite_sum_overflows():
    x = torch.full((8, 2), 3e38)  # every value finite, their float32 sum is not
    data = GPEDData.from_tensors((x, torch.zeros(8, dtype=torch.long)), (x, torch.zeros(8, dtype=torch.long)),
                                 num_outputs=2)
    assert data.non_finite_counts() == {}


class StandardisedDigits(Dataset):
    """A Dataset with a per-pixel standardising transform: pixels that are constant (the digits' border)
    have standard deviation 0, and 0 / 0 is NaN."""

    def __init__(self, x, y):
        self.x, self.y = x, y
        self.mean, self.std = x.mean(0), x.std(0)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return (self.x[i] - self.mean) / self.std, self.y[i]


def test_a_dataset_whose_transform_makes_nan_is_rejected_when_read(digits_data):
    d = digits_data
    train = StandardisedDigits(d.train_x, d.train_y)
    constant = int((train.std == 0).sum())
    assert constant > 0
    count = d.train_x.shape[0] * constant
    with pytest.raises(ValueError, match=rf"non-finite values .* in train_x \({count} values\)"):
        GPEDData.from_datasets(train, TensorDataset(d.test_x, d.test_y))
    with pytest.raises(ValueError, match=r"test_y holds class labels from 3 to 12"):
        GPEDData.from_datasets(TensorDataset(d.train_x, d.train_y), TensorDataset(d.test_x, d.test_y + 3))


def test_data_changed_in_place_after_construction_are_caught_before_any_step(digits_data, no_work):
    x, y = digits_data.train_x.clone(), digits_data.train_y.clone()
    data = GPEDData.from_tensors((x, y), (digits_data.test_x, digits_data.test_y), num_outputs=10)
    x.sub_(x.mean(0)).div_(x.std(0))  # the caller standardises its own tensor in place: 0 / 0 on constant pixels
    with pytest.raises(ValueError, match=r"non-finite values .* in train_x \(\d+ values\), distill_x"):
        distill(data, config(), [StudentConfig("predictive", thinning=2)])
    y.add_(5)
    x.nan_to_num_(0.0)
    with pytest.raises(ValueError, match=r"train_y holds class labels from 5 to 14, but num_outputs=10"):
        distill(data, config(), [])


# ----------------------------------------------------------------------------- networks that make NaN
class NanOnData(nn.Module):
    """A linear network whose outputs are NaN on any non-zero input (finite on the all-zero shape probe)."""

    def __init__(self, out_dim: int = 10, infinite: bool = False) -> None:
        super().__init__()
        self.linear = nn.Linear(64, out_dim)
        self.bad = float("inf") if infinite else float("nan")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.linear(x.flatten(1))
        return torch.where(x.flatten(1).abs().sum(1, keepdim=True) > 0, out * self.bad, out)


class NanEverywhere(NanOnData):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.flatten(1)) * self.bad


@pytest.mark.parametrize("infinite", [False, True], ids=["nan", "inf"])
def test_a_model_that_makes_non_finite_outputs_is_named_before_any_step(digits_data, no_work, infinite):
    """A user's model that outputs NaN or infinity (on the all-zero shape probe, or on the first training inputs)
    is refused when the chain is built, naming the model, not blamed on the step size steps into the run."""
    with pytest.raises(ValueError, match=r"GPEDConfig.model: NanEverywhere maps 2 all-zero inputs to non-finite raw "
                                         r"outputs \(20 of 20 values NaN or infinite\) at its initial parameters"):
        distill(digits_data, config(model=NanEverywhere(infinite=infinite)), [])
    with pytest.raises(ValueError, match=r"GPEDConfig.model: the teacher's raw outputs on the first 3 training "
                                         r"inputs, at its initial parameters, hold non-finite values \(30 of 30 NaN "
                                         r"or infinite\), so every sampling step would diverge whatever the step "
                                         r"size"):
        distill(digits_data, config(model=NanOnData(infinite=infinite)), [])
    student = StudentConfig("predictive", arch=NanEverywhere(infinite=infinite), thinning=2)
    with pytest.raises(ValueError, match=r"student 'predictive-U_s': NanEverywhere maps 2 all-zero inputs to "
                                         r"non-finite raw outputs"):
        distill(digits_data, config(), [student])


# ----------------------------------------------------------------------------- NaN made inside the run
class StandardiseInPlace:
    """A hook that standardises the chain's inputs in place at the first log point (a transform
    applied to the data while the chain runs): pixels of standard deviation 0 become NaN."""

    def __init__(self, data, name):
        self.data, self.name = data, name

    def on_log(self, engine, rows):
        if engine.t == 20:
            x = getattr(self.data, self.name)
            x.sub_(x.mean(0)).div_(x.std(0))

    def on_checkpoint(self, engine):
        pass

    def on_end(self, engine):
        pass


def fresh_digits(digits_data, separate_distill=False):
    d = digits_data
    return dataclasses.replace(d, train_x=d.train_x.clone(),
                               distill_x=d.distill_x.clone() if separate_distill else d.train_x.clone())


def test_nan_made_in_the_run_names_the_data_not_the_step_size(digits_data):
    data = fresh_digits(digits_data)
    engine = GPEDEngine([build_chain(data, config(), [])])
    with pytest.raises(FloatingPointError) as err:
        run_engine(engine, hooks=[StandardiseInPlace(data, "train_x")])
    nan = int(torch.isnan(data.train_x).sum())
    message = str(err.value)
    assert (f"SGLD diverged before step 40: the teacher's minibatch NLL is nan. The chain's data hold non-finite "
            f"values (NaN or infinity) in train_x ({nan} values)") in message
    assert "changed in place" in message
    assert "eta=" not in message and "lower GPEDConfig.sampler.step_size" not in message  # no step-size hint


def test_nan_made_in_d_prime_names_the_data_in_the_students_divergence(digits_data):
    data = fresh_digits(digits_data, separate_distill=True)
    engine = GPEDEngine([build_chain(data, config(), [StudentConfig("predictive", thinning=2)])])
    with pytest.raises(FloatingPointError, match=r"student 'predictive-U_s' diverged before step 40 \(training loss "
                                                 r"nan\); the chain's data hold non-finite values .* in distill_x"):
        run_engine(engine, hooks=[StandardiseInPlace(data, "distill_x")])


def test_a_diverging_chain_on_finite_data_names_the_step_size(digits_data):
    with pytest.raises(FloatingPointError) as err:
        distill(digits_data, config(sampler=SGLDConfig(step_size=5.0, batch_size=50)), [])
    assert "step size eta=5" in str(err.value) and "non-finite" not in str(err.value)


def test_the_data_are_read_only_when_a_divergence_is_raised(digits_data, monkeypatch):
    calls = []
    original = GPEDData.non_finite_counts
    monkeypatch.setattr(GPEDData, "non_finite_counts", lambda self, *a: calls.append(a) or original(self, *a))
    engine = GPEDEngine([build_chain(digits_data, config(), [StudentConfig("predictive", thinning=2)])])
    calls.clear()  # construction and build_chain validate the data once each
    run_engine(engine)
    assert engine.finished and calls == []  # no data pass (and no host synchronisation) in the sampling loop


# ----------------------------------------------------------------------------- corrupt checkpoints
def _truncated(path):
    path.write_bytes(path.read_bytes()[:200])


def _garbage(path):
    path.write_bytes(b"not a checkpoint" * 8)


def _empty(path):
    path.write_bytes(b"")


def _foreign(path):
    torch.save({"format": 2, "net": nn.Linear(2, 2)}, path)  # a module: not tensors and plain data


@pytest.mark.parametrize("damage, reason, cause", [
    (_truncated, "it is not a complete torch archive (truncated or corrupt", RuntimeError),
    (_garbage, "its contents are not tensors and plain data", pickle.UnpicklingError),
    (_empty, "it is empty or cut short", EOFError),
    (_foreign, "its contents are not tensors and plain data", pickle.UnpicklingError),
])
def test_corrupt_checkpoint_leads_with_the_kits_sentence_and_chains_torchs_error(digits_data, tmp_path, damage,
                                                                                 reason, cause, monkeypatch):
    ckpt = tmp_path / "run.pt"
    distill(digits_data, config(num_iterations=20), [], checkpoint=ckpt)
    damage(ckpt)
    before = ckpt.read_bytes()
    monkeypatch.setattr(GPEDEngine, "step", lambda self: pytest.fail("a sampling step ran before the error"))
    with pytest.raises(CheckpointError) as err:
        distill(digits_data, config(num_iterations=20), [], checkpoint=ckpt)
    message = str(err.value)
    assert message.startswith(f"checkpoint {ckpt} cannot be read: {reason}")
    assert "left in place" in message and "move or delete the file" in message
    assert isinstance(err.value.__cause__, cause)
    assert not str(err.value.__cause__) or str(err.value.__cause__) not in message  # the cause, not the text
    assert "weights_only" not in message.replace("safe reader (weights_only)", "")
    assert ckpt.read_bytes() == before  # kept for inspection


def test_corrupt_checkpoint_in_the_store_is_recorded_with_the_kits_sentence(digits_data, tmp_path):
    store = ResultsStore(tmp_path)
    task = ChainTask(digits_data, config(), ())
    entry = store.entry("chain", build_chain(digits_data, task.config, task.students).record())
    entry.path.mkdir(parents=True)
    entry.checkpoint.write_bytes(b"PK\x03\x04 cut short")
    outcome = run_chains([task], store, progress=False).outcomes[0]
    assert outcome.status == Status.FAILED
    assert outcome.error.startswith(f"CheckpointError: checkpoint {entry.checkpoint} cannot be read: it is not a "
                                    "complete torch archive")
    assert "PytorchStreamReader" not in outcome.error


def test_corrupt_trained_hydra_is_a_checkpoint_error_with_torchs_cause(tmp_path):
    path = tmp_path / "hydra.pt"
    path.write_bytes(b"")
    with pytest.raises(CheckpointError, match=rf"^trained Hydra {path} cannot be read: it is empty or cut short\. "
                                              r"Recompute the entry") as err:
        H.load_hydra(path, "fcnn", (1, 8, 8), 10, H.HydraConfig())
    assert isinstance(err.value.__cause__, EOFError)

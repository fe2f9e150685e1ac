"""The work of one batch kind of chains (K chains of one structure, built at the paper profile's real sizes) and
of what a notebook computes after its chains (Experiment 3's fine-tuning, Hydra's phases), counted with
``op_work``; the memory a batch holds on the device. Used by ``paper_profile_work.py`` (see its docstring for the
method)."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import multiprocessing
import resource
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from op_work import EVAL_CHUNK, Ops, Totals, extrapolate, measure, nbytes  # the same folder

from gped_kit.baselines import hydra
from gped_kit.core.targets import resolve_target
from gped_kit.data.container import GPEDData
from gped_kit.data.experiment import DataConfig
from gped_kit.data.sources import DatasetNotFoundError
from gped_kit.data.spiral import spiral_data
from gped_kit.engine import GPEDConfig, GPEDEngine
from gped_kit.engine.config import GroupKey
from gped_kit.engine.spec import ChainSpec, build_chain
from gped_kit.experiments import comparison as C
from gped_kit.experiments import experiment3 as E3
from gped_kit.experiments.chains import ChainTask, load_data
from gped_kit.experiments.paper import FINETUNE_EPOCHS, paper_model
from gped_kit.models.build import instantiate
from gped_kit.models.presets import build_network

# ----------------------------------------------------------------------------- data and chains
_FAKE: dict[tuple, torch.Tensor] = {}


def _fake(key: tuple, shape: tuple, labels: bool = False) -> torch.Tensor:
    if key not in _FAKE:
        gen = torch.Generator().manual_seed(abs(hash(key)) % 2**31)
        _FAKE[key] = (torch.randint(0, 10, shape, generator=gen) if labels
                      else torch.rand(shape, generator=gen))
    return _FAKE[key]


def task_data(task: ChainTask) -> tuple[GPEDData, bool]:
    """The task's data at its real sizes, and whether it is real (CIFAR-10: random tensors of its shapes)."""
    try:
        return load_data(task.data, torch.device("cpu")), True
    except DatasetNotFoundError:
        cfg = task.data
        assert isinstance(cfg, DataConfig) and cfg.dataset == "cifar10", cfg
        n = cfg.labelled_size or 50_000
        shape = (3, 32, 32)
        return GPEDData(train_x=_fake(("x", n, cfg.seed), (n, *shape)), train_y=_fake(("y", n, cfg.seed), (n,), True),
                        distill_x=_fake(("d", cfg.seed), (50_000, *shape)).clone(),  # each chain its own copy,
                        test_x=_fake(("t",), (10_000, *shape)).clone(),  # as a real load gives it
                        test_y=_fake(("ty",), (10_000,), True), num_outputs=10,
                        info={"dataset": "cifar10", "labelled_size": n, "mask_size": 0}), False


def spec_of(task: ChainTask) -> tuple[ChainSpec, bool]:
    data, real = task_data(task)
    config = dataclasses.replace(task.config, progress=False, device="cpu")
    return build_chain(data, config, task.students), real


def _digest(t: torch.Tensor) -> str:
    return hashlib.sha1(t.contiguous().numpy().tobytes()).hexdigest()


def batch_memory(tasks: Sequence[ChainTask], state_per_chain: int) -> dict[str, float]:
    """Bytes a batch of ``tasks`` holds: the engine's (state x K + each distinct data set once, as its
    ChainSets store them) and on the device in all: the chains' own data tensors (their ChainSpecs keep
    them), plus, for each kind of set (D, D', evaluation inputs) that is not the same for every chain,
    the engine's concatenation of the distinct ones (a kind shared by all chains is used in place),
    plus a chain's concatenation of its test and OOD inputs. Loads one chain's data at a time."""
    distinct: dict[str, dict[str, int]] = {"train": {}, "distill": {}, "eval": {}}
    own = 0
    for task in tasks:
        data, _ = task_data(task)
        evaluation = torch.cat([data.test_x, *data.ood_x.values()]) if data.ood_x else data.test_x
        for kind, tensors in (("train", (data.train_x, data.train_y)), ("distill", (data.distill_x,)),
                              ("eval", (evaluation,))):
            distinct[kind][":".join(_digest(t) for t in tensors)] = sum(nbytes(t) for t in tensors)
        own += sum(nbytes(t) for t in (data.train_x, data.train_y, data.distill_x, data.test_x, data.test_y,
                                        *data.ood_x.values()))
        if data.ood_x:
            own += nbytes(evaluation)
        del data, evaluation
    data_bytes = sum(sum(d.values()) for d in distinct.values())
    copies = sum(sum(d.values()) for d in distinct.values() if len(d) > 1)
    state = state_per_chain * len(tasks)
    return {"engine": state + data_bytes, "device": state + own + copies, "data": data_bytes}


def _rss_child(tasks: Sequence[ChainTask]) -> float:
    """In a fresh process: build the batch at its real sizes, take a teacher step, every group's student
    step, one ensemble chunk and one evaluation chunk; the process's peak RSS in bytes."""
    engine = GPEDEngine([spec_of(t)[0] for t in tasks])
    engine.step()
    for key in engine.chains[0].groups:
        engine.distill_group(key, engine.config.burn_in + 1)
    with _limited(engine, EVAL_CHUNK):
        engine.accumulate()
        engine.student_outputs(["test"])
    return peak_rss()


def peak_rss() -> float:
    """This process's peak RSS in bytes: VmHWM (ru_maxrss would carry the parent's peak across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0


def measured_rss(tasks: Sequence[ChainTask]) -> float:
    """Peak RSS (bytes) of a fresh process that holds the batch at its real sizes (:func:`_rss_child`)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_rss_child, (list(tasks),))


# ----------------------------------------------------------------------------- events of a chain kind
def count_after_burn_in(T: int, B: int, every: int) -> int:
    """#{t : B < t < T, t mod every = 0}: how often GPEDEngine.step does an every-``every`` event."""
    return (T - 1) // every - B // every


def log_evaluations(config: GPEDConfig) -> int:
    """Log points after burn-in (each evaluates every student on the test set)."""
    T, B, L = config.num_iterations, config.burn_in, config.log_every
    points = set(range(L, T + 1, L)) | {T}
    return sum(1 for t in points if t > B)


@dataclass
class KindWork:
    """One batch kind: K chains of one structure, and how many such batches the notebook runs."""

    label: str
    model: str  # the teacher's model (the spiral's FCNN is "spiral fcnn")
    K: int
    batches: int
    config: GPEDConfig
    teacher: Ops
    groups: dict[GroupKey, Ops]
    accumulate_chunk: Ops  # one chunk of EVAL_CHUNK evaluation inputs
    students_chunk: Ops  # every student on one chunk of EVAL_CHUNK test inputs
    num_eval: int
    num_test: int
    state_per_chain: int
    student_steps_per_chain: int
    group_sizes: dict[GroupKey, int] = field(default_factory=dict)  # students per distillation group
    memory: dict[str, float] = field(default_factory=dict)

    def totals(self) -> dict[str, Totals]:
        c = self.config
        T, B = c.num_iterations, c.burn_in
        out = {"teacher": self.teacher.repeated(T)}
        out["students"] = Totals()
        for key, ops in self.groups.items():
            out["students"] = out["students"] + ops.repeated(count_after_burn_in(T, B, key.thinning))
        ensemble = count_after_burn_in(T, B, c.eval_thinning) * self.num_eval / EVAL_CHUNK
        evals = log_evaluations(c) * self.num_test / EVAL_CHUNK + self.num_eval / EVAL_CHUNK
        out["evaluation"] = self.accumulate_chunk.repeated(ensemble) + self.students_chunk.repeated(evals)
        return {k: Totals(*(x * self.batches for x in dataclasses.astuple(v))) for k, v in out.items()}


@contextlib.contextmanager
def _limited(engine: GPEDEngine, n: int) -> Iterator[None]:
    """The engine's evaluation limited to its first ``n`` inputs (one chunk): its set-up replaced for the
    duration (the set-up is frozen; the ensemble's sums keep their rows, of which the first ``n`` are used)."""
    saved = engine.setup
    engine.setup = dataclasses.replace(saved, num_eval=n, eval_slices={"test": slice(0, n)})
    try:
        yield
    finally:
        engine.setup = saved


def _measure_engine(engine: GPEDEngine) -> tuple[Ops, dict[GroupKey, Ops], Ops, Ops]:
    engine.step()  # warm-up at t = 0 (before burn-in: the teacher only)
    teacher = measure(engine.step)
    t = engine.config.burn_in + 1
    groups = {key: measure(lambda key=key: engine.distill_group(key, t)) for key in engine.chains[0].groups}
    with _limited(engine, EVAL_CHUNK):
        accumulate = measure(engine.accumulate)
        outputs = measure(lambda: engine.student_outputs(["test"]))
    return teacher, groups, accumulate, outputs


def model_label(task: ChainTask) -> str:
    return task.config.model_name if isinstance(task.data, DataConfig) else f"spiral {task.config.model_name}"


def measure_kind(label: str, tasks: Sequence[ChainTask], batches: int = 1) -> KindWork:
    """Build and measure one batch kind (``tasks`` = the chains of its largest batch)."""
    K = len(tasks)
    if K == 1:
        spec, _ = spec_of(tasks[0])
        engine = GPEDEngine([spec])
        teacher, groups, accumulate, outputs = _measure_engine(engine)
        ref = engine
    else:
        measured = {}
        for k in (2, 3):
            specs = [spec_of(t)[0] for t in (list(tasks) * 3)[:k]]
            engine = GPEDEngine(specs, use_vmap=True)
            measured[k] = _measure_engine(engine)
            ref = engine
        a, b = measured[2], measured[3]
        teacher = extrapolate(a[0], 2, b[0], 3, K)
        groups = {key: extrapolate(a[1][key], 2, b[1][key], 3, K) for key in b[1]}
        accumulate = extrapolate(a[2], 2, b[2], 3, K)
        outputs = extrapolate(a[3], 2, b[3], 3, K)
    mem = ref.memory_bytes()
    state = (mem["total"] - mem["data"]) // ref.K
    spec0 = ref.chains[0]
    T, B = spec0.config.num_iterations, spec0.config.burn_in
    student_steps = sum(count_after_burn_in(T, B, s.config.thinning) for s in spec0.students)
    return KindWork(label, model_label(tasks[0]), K, batches, spec0.config, teacher, groups, accumulate, outputs,
                    ref.num_eval, int(spec0.data.test_x.shape[0]), state, student_steps,
                    {key: len(slots) for key, slots in spec0.groups.items()})


# ----------------------------------------------------------------------------- work after the chains
def finetune_work(task: ChainTask, settings: E3.Experiment3Settings) -> tuple[Totals, int]:
    """Experiment 3 after the chain: each group l1/l2 student fine-tuned (upper bound: unpruned) for
    epochs x N / M / H steps, evaluated on the test set after pruning and after fine-tuning, and
    every network's latency passes (batch 100, ``latency_repeats`` times)."""
    data, _ = task_data(task)
    model = task.config.model_name
    out_dims = {}
    epochs = settings.search.finetune_epochs or FINETUNE_EPOCHS[paper_model(model).dataset]
    total, steps_all = Totals(), 0
    x = data.distill_x[:1_000]
    shape = tuple(data.input_shape)
    for s in task.students:
        target = resolve_target(s.target)
        dim = out_dims.setdefault(target.name, target.out_dim(10))
        net = build_network(s.arch, shape, dim)
        latency = measure(lambda net=net: net.eval()(torch.zeros(settings.search.latency_batch_size, *shape)))
        networks = 1 if s.regularizer is None else 3  # a group l1/l2 student: distilled, pruned, fine-tuned
        total = total + latency.repeated((settings.search.latency_repeats + 3) * networks)  # 3 warm-up passes
        if s.regularizer is None:
            continue
        targets = torch.rand(x.shape[0], dim)
        targets = targets.softmax(-1) if target.predictive_classes else targets
        one = measure(lambda: E3.finetune(net, x, targets, target, 1, 1e-3, batch_size=s.batch_size)).repeated(1)
        two = measure(lambda: E3.finetune(net, x, targets, target, 2, 1e-3, batch_size=s.batch_size)).repeated(1)
        steps = int(round(epochs * task.data.labelled_size / task.config.sampler.batch_size / s.thinning))
        steps_all += steps
        total = total + one + (two - one) * (steps - 1)
        test = measure(lambda net=net: net.eval()(data.test_x[:EVAL_CHUNK]))
        total = total + test.repeated(2 * data.test_x.shape[0] / EVAL_CHUNK)
    return total, steps_all


def hydra_work(task: ChainTask, settings: C.ComparisonSettings, spiral: bool = False) -> tuple[Totals, int]:
    """Hydra on a chain's S snapshots: their logits on D' (S forward passes over D'), phase 1 (one
    head) and phase 2 (S heads) Adam steps, and the comparison's evaluation of the snapshots and
    Hydra on every evaluation set (twice each: uncertainties and marginal variances)."""
    data, _ = task_data(task) if not spiral else (None, True)
    if spiral:
        data = spiral_data(task.data)
    config = settings.spiral.hydra if spiral else settings.hydra
    S = task.config.num_snapshots
    arch = task.config.model_name if not spiral else "fcnn"
    shape = tuple(data.input_shape)
    c = data.num_classes
    teacher = instantiate(task.config.model, shape, c, "model")
    snaps = torch.nn.utils.parameters_to_vector(teacher.parameters()).detach().expand(S, -1).contiguous()
    n_sub = min(data.distill_x.shape[0], 1_000)
    one_pass = measure(lambda: hydra.snapshot_logits(snaps[:1], arch, shape, c, data.distill_x[:n_sub]))
    distill_passes = S * data.distill_x.shape[0] / n_sub
    total = one_pass.repeated(distill_passes)
    logits = torch.randn(S, n_sub, c)

    def train(p1: int, p2: int) -> Ops:
        cfg = dataclasses.replace(config, phase1_steps=p1, phase2_steps=p2)
        return measure(lambda: hydra.train_hydra(logits, data.distill_x[:n_sub], arch, shape, cfg, progress=False))

    base, p1, p2 = train(1, 1).repeated(1), train(2, 1).repeated(1), train(1, 2).repeated(1)
    total = total + base + (p1 - base) * (config.phase1_steps - 1) + (p2 - base) * (config.phase2_steps - 1)
    eval_inputs = data.test_x.shape[0] + sum(v.shape[0] for v in data.ood_x.values())
    net = hydra.build_hydra(arch, shape, c, S, config.head_hidden)
    head_pass = measure(lambda: net.eval()(data.test_x[:EVAL_CHUNK]))
    total = total + one_pass.repeated(2 * S * eval_inputs / n_sub) + head_pass.repeated(2 * eval_inputs / EVAL_CHUNK)
    return total, config.phase1_steps + config.phase2_steps

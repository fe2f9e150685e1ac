"""The search (paper 003, Section 3.3): a chain's students costed, the group l1/l2 students pruned
(:func:`gped_kit.models.pruning.prune`: units whose incoming weights all lie below epsilon are
removed physically, and the pruned network equals the masked one) and fine-tuned
(:mod:`.finetune`), every network evaluated as Algorithm 1 reports it, through the results store.

**Through the results store.** :func:`run_experiment3` keeps the search table of a chain
(:func:`~gped_kit.experiments.experiment3.tasks.experiment3_task`) as a derived entry of kind
``"search"`` (record: the chain's record and :class:`SearchSettings`; numerics: the chain's and the
search's versions, :mod:`~gped_kit.experiments.numerics`). Only when that entry is
missing, or its chain was stored before its students reported skill (then both are computed again), is the
chain's full state asked for (:func:`~gped_kit.experiments.chains.run_chains` with
``requires_state=True``: reused from the chain entry's checkpoint, or computed), and the costs,
pruning and fine-tuning run. :func:`load_search_results` reads every stored search table.

**Costs** (:mod:`gped_kit.models.cost`): parameters, FLOPs per input (PyTorch's counter: FLOPs = 2 x
multiply-accumulates of matmuls and convolutions) and measured latency per batch.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from torch import nn

from ...core.schema import record
from ...core.status import Status
from ...core.targets import Target, resolve_target
from ...data.container import GPEDData
from ...engine import GPEDResult
from ...engine.evaluate import prediction_metrics
from ...engine.spec import ChainSpec
from ...models.build import instantiate
from ...models.cost import network_cost
from ...models.presets import EVAL_CHUNK_SIZE, ArchSpec, cpu_training_layout, inference_network
from ...models.pruning import mask_network, prune, unit_keep_masks
from ..chains import ChainTask
from ..derived import DerivedTask, run_derived
from ..numerics import numerics_code
from ..paper import FINETUNE_EPOCHS, paper_model
from ..store import Entry, ResultsStore
from .finetune import finetune
from .pareto import search_candidates
from .settings import SearchSettings
from .tasks import COMPANION, task_targets

#: The store's entry kind and table name of a search.
SEARCH_KIND = "search"
SEARCH_TABLE = "search"
#: Summary columns not copied into the search table (they describe the chain's run, not a network).
_RUN_COLUMNS = ("store_status", "iterations_per_s", "elapsed_s", "student_train_loss")


@torch.no_grad()
def evaluate_student(net: nn.Module, spec: ChainSpec, target: str | Target, ensemble: Mapping[str, torch.Tensor],
                     batch_size: int = EVAL_CHUNK_SIZE) -> dict[str, float]:
    """Test metrics of a student network as Algorithm 1 reports them: its linked outputs on the
    chain's test set (``spec.data.test_x``, in chunks of ``batch_size``), scored by the engine's
    :func:`~gped_kit.engine.evaluate.prediction_metrics` against the teacher ensemble's estimates
    ``ensemble`` (:attr:`GPEDResult.teacher_outputs` ``["test"]``): ``student_nll`` and
    ``student_accuracy`` (predictive targets), ``target_mae``, ``entropy_mae`` (entropy targets)
    and ``nll_gap`` (student - teacher NLL)."""
    target = resolve_target(target)
    net = inference_network(net)
    x = spec.data.test_x
    output = torch.cat([target.link(net(x[i:i + batch_size])) for i in range(0, x.shape[0], batch_size)])
    return prediction_metrics(spec, target, output, dict(ensemble))


@dataclass
class SearchResult:
    """One data setting's search of one ``target``: ``table`` (one row per network, see :func:`run_experiment3`),
    ``status`` (``ran``: the search was computed now, ``reused``: read from the store, ``missing
    data``, ``failed``), ``error`` (the message, e.g. the loader's), ``chain_status`` (what
    :func:`~gped_kit.experiments.chains.run_chains` did with the chain when the search was
    computed: ``ran``/``resumed``/``reused``; empty when it was not needed), the search's store
    entry and the time."""

    model: str
    table: pd.DataFrame
    status: Status
    error: str = ""
    entry: Entry | None = None
    seconds: float = 0.0
    chain_status: str = ""
    target: str = ""

    @property
    def run_dir(self) -> Path | None:
        """The search entry's directory (None without an entry)."""
        return self.entry.path if self.entry is not None else None

    @property
    def candidates(self) -> pd.DataFrame:
        """The search's outputs: exhaustive students and fine-tuned pruned students."""
        return search_candidates(self.table)


#: Search statuses, the most telling first: a merged search (:func:`merged_search`) takes the first one present.
_STATUS_ORDER = (Status.FAILED, Status.MISSING_DATA, Status.NOT_STORED, Status.RAN, Status.RESUMED, Status.REUSED)


def merged_search(searches: Sequence[SearchResult]) -> SearchResult:
    """One data setting's searches of several targets (one chain each, :func:`experiment3_tasks`) as one
    :class:`SearchResult`: the tables stacked (a ``target`` column tells them apart), the most telling
    status (failed, missing data, not stored, ran, resumed, reused: the first present), the errors and
    chain statuses joined, the times summed; ``entry`` is the first search's, ``target`` the targets
    joined by ``+``. ValueError for no searches or searches of different models."""
    searches = list(searches)
    if not searches or len({s.model for s in searches}) != 1:
        raise ValueError(f"merged_search: give the searches of one model, got {[s.model for s in searches]}")
    if len(searches) == 1:
        return searches[0]
    tables = [s.table for s in searches if len(s.table)]
    statuses = [s.status for s in searches]
    status = next((st for st in _STATUS_ORDER if st in statuses), statuses[0])
    return SearchResult(searches[0].model, pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(), status,
                        "\n".join(dict.fromkeys(s.error for s in searches if s.error)), searches[0].entry,
                        sum(s.seconds for s in searches), "+".join(dict.fromkeys(s.chain_status for s in searches
                                                                                  if s.chain_status)),
                        "+".join(s.target for s in searches))


def run_experiment3(task: ChainTask, settings: SearchSettings, store: ResultsStore, recompute: bool = False,
                    progress: bool = True, executor: str = "local", address: str | None = None) -> SearchResult:
    """One Experiment 3 data setting through the results store: the search table of ``task``'s
    chain (:func:`experiment3_task`) under ``settings``.

    The table is the ``"search"`` entry derived from the chain
    (:func:`~gped_kit.experiments.derived.derive`: keyed by the chain's record, ``record(settings)`` and
    the search's numerics version, :mod:`~gped_kit.experiments.numerics`). When it is stored it is read
    back (status ``reused``) and the chain is not touched. Otherwise the chain's full state is asked for
    (reused from the chain entry's checkpoint, resumed, or run), then the costs, pruning and
    fine-tuning are computed and the table stored (status ``ran``). ``recompute`` sets the stored
    search and chain aside and computes both again. An absent data set gives status ``missing
    data`` with the loader's message, a failed chain status ``failed`` with its error (nothing is
    stored for either). :func:`run_searches` does this for several data settings, locally or as
    Ray tasks.

    The table has one row per network with the chain's configuration columns and
    ``method`` (``teacher``/``exhaustive``/``group_lasso``), ``stage`` (``teacher``,
    ``distilled``, ``pruned``, ``fine-tuned``), ``is_base`` (the exhaustive student with the
    teacher's architecture), the costs of :func:`gped_kit.models.cost.network_cost` (``params``,
    ``flops``, ``macs``, ``latency_ms``, ``architecture``, ``widths``), the metrics
    (``student_nll``, ``student_accuracy``, ``entropy_mae``, ``target_mae``, ``nll_gap``),
    the teacher's (``teacher_nll``, ``teacher_accuracy``, ``teacher_samples``), ``run_key`` (the
    chain's entry key), and for pruned students ``units_removed``, ``prune_check_max_abs_diff``
    (the largest |pruned - masked| output difference on 1,000 test inputs) and
    ``finetune_steps``; ``chain_seconds`` (the chain with all students attached) and
    ``search_seconds`` (costs, pruning, fine-tuning) time the two stages. The teacher row
    carries one teacher network's costs; the ensemble costs ``teacher_samples`` times as much.
    """
    return run_searches([task], settings, store, recompute, progress, executor, address)[0]


def _search_compute(settings: SearchSettings) -> Callable[[Entry, GPEDResult, GPEDData], None]:
    """The computation of a search entry from its chain's full result (runs where the chain is)."""

    def compute(entry: Entry, result: GPEDResult, data: GPEDData) -> None:
        stage_started = time.perf_counter()
        table = search_table(result, settings, entry.store.entry("chain", result.spec.record()).key)
        summary = result.summary
        table["chain_seconds"] = float(summary["elapsed_s"].iloc[0]) if "elapsed_s" in summary else math.nan
        table["search_seconds"] = time.perf_counter() - stage_started
        entry.write_table(SEARCH_TABLE, table)

    return compute


def run_searches(tasks: Sequence[ChainTask], settings: SearchSettings, store: ResultsStore, recompute: bool = False,
                 progress: bool = True, executor: str = "local", address: str | None = None) -> list[SearchResult]:
    """:func:`run_experiment3` for several data settings (e.g. one per model), in task order.
    ``executor="ray"`` computes each missing search -- its chain and the search together, since
    the search needs the chain's networks and U_o stores -- as a Ray task (one GPU when the
    chain's device is CUDA) at ``address`` (:func:`~gped_kit.experiments.derived.run_derived`);
    stored searches are read back on the driver without starting anything."""
    for task in tasks:
        if not isinstance(task, ChainTask):
            raise TypeError(f"task must be a ChainTask (see experiment3_task), got {type(task).__name__}")
    if not isinstance(settings, SearchSettings):
        raise TypeError(f"settings must be a SearchSettings, got {type(settings).__name__}")
    items = [DerivedTask(task, SEARCH_KIND, {"settings": record(settings)}, _search_compute(settings))
             for task in tasks]
    results = []
    for task, outcome in zip(tasks, run_derived(items, store, recompute, progress, executor, address)):
        table = comparable_latency(outcome.entry.table(SEARCH_TABLE)) if outcome.entry is not None else pd.DataFrame()
        results.append(SearchResult(task.config.model_name, table, outcome.status, outcome.error, outcome.entry,
                                    outcome.seconds, outcome.chain.status, "+".join(task_targets(task))))
    return results


def _finetune_steps(epochs: float, spec: ChainSpec, thinning: int) -> int:
    """Student steps in ``epochs`` teacher epochs: epochs * (N / M) SGLD steps, one student step per H."""
    return int(round(epochs * spec.num_train / spec.config.sampler.batch_size / thinning))


def _teacher_network(spec: ChainSpec) -> nn.Module:
    """A network of the teacher's architecture on the chain's device (for its costs; the values
    are a fresh draw, which the costs do not depend on), without touching the global random stream."""
    cuda = [spec.device.index or 0] if spec.device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        net = instantiate(spec.config.model, spec.data.input_shape, spec.likelihood.raw_outputs(spec.data.num_outputs),
                          "GPEDConfig.model")
    net = net.to(spec.device)
    return cpu_training_layout(net) if spec.device.type == "cpu" else net


def _finetuned(net: nn.Module, result: GPEDResult, label: str, target: Target, finetuning: Mapping) -> nn.Module:
    """A copy of ``net`` fine-tuned (:func:`.finetune.finetune`, keywords ``finetuning``) on the U_o estimates over
    D' that the chain stored for the student ``label`` (its own, or its U_o companion's)."""
    data = result.spec.data
    idx, estimates = result.store(label)
    idx = idx.to(data.distill_x.device)
    return finetune(copy.deepcopy(net), data.distill_x[idx], estimates.to(data.distill_x.device), target,
                    noise_std=data.distill_noise_std, **finetuning)


def search_table(result: GPEDResult, settings: SearchSettings, chain_key: str = "") -> pd.DataFrame:
    """The search table (see :func:`run_experiment3`) of a chain's full results (``result.spec``
    and the students' networks and U_o stores: :func:`~gped_kit.experiments.chains.run_chains`
    with ``requires_state=True``), without the timing columns."""
    spec = result.spec
    if spec is None:
        raise ValueError("result holds tables only (reloaded without its checkpoint); the search needs the "
                         "chain's networks and U_o stores: run_chains(..., requires_state=True)")
    data, config = spec.data, spec.config
    model = config.model_name
    shape = tuple(data.input_shape)
    ensemble = result.teacher_outputs.get("test", {})
    summary = result.summary.set_index("student")
    dataset = str(data.info.get("dataset", ""))
    epochs = (settings.finetune_epochs if settings.finetune_epochs is not None
              else FINETUNE_EPOCHS.get(dataset, FINETUNE_EPOCHS["mnist"]))
    lr = settings.finetune_lr if settings.finetune_lr is not None else paper_model(model).finetune_lr
    halving_epochs = (settings.finetune_lr_halving_epochs if settings.finetune_lr_halving_epochs is not None
                      else paper_model(model).lr_halving_epochs)

    def costs(net: nn.Module) -> dict:
        return network_cost(net, shape, settings.latency_batch_size, settings.latency_repeats)

    rows = []
    first = summary.reset_index().iloc[0].to_dict() if len(summary) else {}
    common = {k: first.get(k) for k in ("dataset", "labelled_size", "mask_size", "masking_rate", "model",
                                        "step_size", "num_iterations", "burn_in", "seed", "device")
              if k in first}
    common["run_key"] = chain_key
    teacher_cols = {"teacher_nll": first.get("teacher_nll", math.nan),
                    "teacher_accuracy": first.get("teacher_accuracy", math.nan),
                    "teacher_samples": first.get("teacher_samples", math.nan)}
    rows.append({**common, **teacher_cols, "method": "teacher", "stage": "teacher", "student": "teacher",
                 "target": spec.likelihood.ensemble_target, "is_base": False,
                 "student_nll": teacher_cols["teacher_nll"], "student_accuracy": teacher_cols["teacher_accuracy"],
                 **costs(_teacher_network(spec))})
    for i, s in enumerate(spec.students):
        cfg, label = s.config, s.label
        net = result.student_network(label).to(spec.device)
        base_row = {k: v for k, v in summary.loc[label].to_dict().items() if k not in _RUN_COLUMNS}
        if label.startswith(f"{COMPANION}-"):
            continue  # supplies the fine-tuning targets; not a search candidate
        method = "group_lasso" if cfg.regularizer == "group_lasso" and cfg.reg_weight > 0 else "exhaustive"
        arch = cfg.arch if cfg.arch is not None else config.model
        is_base = method == "exhaustive" and isinstance(arch, ArchSpec) and arch.k1 == 1 and arch.k2 == 1
        base_row.update(common, **teacher_cols, method=method, stage="distilled", student=label, is_base=bool(is_base))
        rows.append({**base_row, **costs(net)})
        metric_cols = [c for c in ("student_nll", "student_accuracy", "target_mae", "entropy_mae", "nll_gap")
                       if c in base_row]
        clean = {k: v for k, v in base_row.items() if k not in metric_cols and k != "student_params"}
        steps = _finetune_steps(epochs, spec, cfg.thinning)
        halving = _finetune_steps(halving_epochs, spec, cfg.thinning) if halving_epochs else None
        finetuning = {"steps": steps, "lr": lr, "batch_size": cfg.batch_size,
                      "lr_halving_steps": max(halving, 1) if halving else None, "seed": settings.seed * 1000 + i}
        if method != "group_lasso":
            if settings.finetune_exhaustive:  # the fair comparison: the grid fine-tuned as the pruned students are
                net_tuned = _finetuned(net, result, label, s.target, finetuning)
                rows.append({**clean, "stage": "fine-tuned", "finetune_steps": steps, "finetune_lr": lr,
                             **evaluate_student(net_tuned, spec, s.target, ensemble), **costs(net_tuned)})
            continue
        masks = unit_keep_masks(net, settings.prune_eps, settings.prune_criterion)
        pruned = prune(net, masks=masks, fold_bias=settings.fold_bias)
        masked = mask_network(net, masks, zero_bias=not settings.fold_bias).eval()
        with torch.no_grad():
            x = data.test_x[:1000]
            check = float((pruned.eval()(x) - masked(x)).abs().max())
        removed = sum(int((~m).sum()) for m in masks)
        prune_cols = {"units_removed": removed, "prune_check_max_abs_diff": check, "prune_eps": settings.prune_eps,
                      "prune_criterion": settings.prune_criterion}
        rows.append({**clean, **prune_cols, "stage": "pruned",
                     **evaluate_student(pruned, spec, s.target, ensemble), **costs(pruned)})
        pruned_tuned = _finetuned(pruned, result, label, s.target, finetuning)
        rows.append({**clean, **prune_cols, "stage": "fine-tuned", "finetune_steps": steps, "finetune_lr": lr,
                     **evaluate_student(pruned_tuned, spec, s.target, ensemble), **costs(pruned_tuned)})
    return pd.DataFrame(rows)


def load_search_results(store: ResultsStore, code: str | None = None) -> pd.DataFrame:
    """Every stored search table of ``store`` made by numerics code ``code`` (default: this checkout's,
    :func:`~gped_kit.experiments.numerics.numerics_code`; searches made by older numerics versions, which a
    bump leaves in the store, are not read), complete ``"search"`` entries only, concatenated, with the search
    entry's key in column ``entry``; an empty frame when there is none."""
    if not isinstance(store, ResultsStore):
        raise TypeError(f"store must be a ResultsStore (gped_kit.experiments.store), got {type(store).__name__}")
    return comparable_latency(store.load(SEARCH_TABLE, SEARCH_KIND,
                                         code=numerics_code(SEARCH_KIND) if code is None else code))


def comparable_latency(table: pd.DataFrame) -> pd.DataFrame:
    """A search table with only the latencies that can be compared with each other: a search stored before
    every network was timed in one layout (rows without ``latency_layout``,
    :func:`~gped_kit.models.cost.network_cost`) timed its *pruned* convolutional students on the CPU in the
    default layout, while the others ran in the faster channels-last one (a pruned copy of a network with
    nothing removed read 15.1 ms against its source's 7.6 ms): those latencies are left out (NaN); the
    student's other numbers stand. A new search of the chain times them again."""
    if table.empty or "latency_ms" not in table:
        return table
    old = table["latency_layout"].isna() if "latency_layout" in table else pd.Series(True, index=table.index)
    pruned = table["prune_eps"].notna() if "prune_eps" in table else pd.Series(False, index=table.index)
    convolutional = table["architecture"].astype(str).str.contains("Conv(", regex=False)
    on_cpu = table["latency_device"].astype(str).eq("cpu") if "latency_device" in table else True
    stale = old & pruned & convolutional & on_cpu
    if not stale.any():
        return table
    table = table.copy()
    table.loc[stale, "latency_ms"] = math.nan
    return table

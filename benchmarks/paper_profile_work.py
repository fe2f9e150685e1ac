"""The paper profile's work per notebook, and a predicted time on one H100 (writes docs/paper_profile.md).

    .venv/bin/python benchmarks/paper_profile_work.py            # measure, print, write docs/paper_profile.md
    .venv/bin/python benchmarks/paper_profile_work.py --no-write # print only

Nothing here runs a chain to its end: the paper profile (T = 10^6) is a GPU job. For every notebook
with a ``paper`` profile the script builds the notebook's chains exactly as the notebook does (the
experiment modules' task builders with the *unscaled* paper profile), groups them into the batches
:func:`~gped_kit.experiments.chains.run_chains` computes together (up to ``chains_per_batch``
consecutive chains of one structure), builds the real :class:`~gped_kit.engine.GPEDEngine` at the
real sizes (real MNIST; CIFAR-10, absent here, replaced by random tensors of its shapes), and measures
one occurrence of every kind of event of :meth:`GPEDEngine.step <gped_kit.engine.GPEDEngine.step>`
under :class:`torch.utils.flop_counter.FlopCounterMode` and a dispatch mode that records every aten op:

* the **teacher step** (SGLD on M = 100: forward, backward, update; every iteration);
* each **distillation group**'s step (S' drawn, the teacher's statistics on it, one Adam step of every
  student of the group; every H iterations after burn-in);
* the **ensemble accumulation** (the teacher on every evaluation input; every ``eval_thinning``
  iterations after burn-in) and the **student evaluation** at each log point and at the end
  (every student on the test set, and on every evaluation set at the end), measured on one chunk of
  500 inputs and scaled to the set sizes;

and per op: FLOPs (FlopCounterMode's registry: 2 x multiply-accumulates of matmuls and convolutions,
forward and backward; each event's total is checked against FlopCounterMode's, with one correction:
torch 2.14's formula for a *grouped* convolution's backward counts the weight gradient ``groups`` times
too often, and under ``torch.func.vmap`` every convolution of K chains is grouped, g = K, so the
batched CNN steps are counted per group, see ``op_work._grouped_conv_backward_flops``), **bytes moved**
(the bytes of the op's tensor inputs and outputs: every op reads its inputs from and writes its
outputs to memory, no cache reuse and no fusion, as eager PyTorch runs it; gathers and scatters
count only the rows they touch) and whether it is a **kernel** (an aten op that is not a view).
Batched kinds are measured at 2 and 3 chains (the vmapped path the engine takes for K > 1) and
extrapolated per op, linearly, to the batch's K; one-chain kinds are measured as they run (the
unbatched path).

Event counts over the chain follow :meth:`GPEDEngine.step` exactly: T teacher steps; a group of
thinning H steps at every t with B < t < T and t mod H = 0, i.e. floor((T - 1) / H) - floor(B / H)
times (9,989 for H = 100 and 99,899 for H = 10 at T = 10^6, B = 1,000); the ensemble likewise with
``eval_thinning``; student evaluations at every log point after burn-in and once more at the end.
After the chains: Experiment 3's fine-tuning of every pruned student (``epochs x N / M / H`` Adam
steps, measured on the unpruned largest network: an upper bound) with its evaluations and latency
passes; Hydra's two phases and its snapshot logits (notebook 07), and the spiral's chain.

**Memory** (the largest batch of each notebook): the tensors the engine holds, by torch's accounting
(:meth:`GPEDEngine.memory_bytes`: parameters, Adam state, U_o stores, ensemble sums, snapshots and
data, each distinct data set once), and the bytes the run keeps on the device in all: the engine's
tensors plus each chain's own copy of its data (the chains' :class:`~gped_kit.data.container.GPEDData`
stays referenced next to the engine's concatenated sets), counted over distinct storages. Data
sets are loaded one chain at a time and compared by content to find the distinct ones, so the
largest batch never has to fit in this machine's memory.

**The prediction** is a roofline per kernel, summed: ``t = max(FLOPs / peak, bytes / bandwidth,
launch)`` with the peaks of one H100 SXM (see ``ASSUMPTIONS``). It is a prediction from counted work,
not a measurement.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from chain_work import (  # the same folder: run as python benchmarks/paper_profile_work.py
    KindWork,
    batch_memory,
    count_after_burn_in,
    finetune_work,
    hydra_work,
    measure_kind,
    measured_rss,
    model_label,
    peak_rss,
)
from op_work import (
    ASSUMPTIONS,
    EVAL_CHUNK,
    FP32_PEAK,
    HBM_BANDWIDTH,
    HOST_LAUNCH_S,
    LAUNCH_S,
    Totals,
)

from gped_kit.cli.readme import render_deviations
from gped_kit.data.spiral import SpiralConfig
from gped_kit.engine.config import GroupKey
from gped_kit.experiments import comparison as C
from gped_kit.experiments import experiment3 as E3
from gped_kit.experiments.chains import ChainTask
from gped_kit.experiments.frame import AfterChains
from gped_kit.experiments.registry import NOTEBOOKS


# ----------------------------------------------------------------------------- the notebooks
@dataclass
class NotebookWork:
    name: str
    chains: int
    sgld_steps: int
    student_steps: int
    totals: dict[str, Totals]
    memory: dict[str, float]
    notes: list[str] = field(default_factory=list)
    kinds: list[KindWork] = field(default_factory=list)
    extra_steps: int = 0
    extra_label: str = ""

    @property
    def total(self) -> Totals:
        out = Totals()
        for v in self.totals.values():
            out = out + v
        return out


def _batched(tasks: Sequence[ChainTask], per_batch: int) -> list[list[ChainTask]]:
    """Consecutive tasks of one model in batches of at most ``per_batch`` (as run_chains groups them)."""
    out: list[list[ChainTask]] = []
    for task in tasks:
        if out and len(out[-1]) < per_batch and out[-1][0].config.model_name == task.config.model_name:
            out[-1].append(task)
        else:
            out.append([task])
    return out


def chains_work(name: str, tasks: Sequence[ChainTask], per_batch: int | str = 1, notes: Sequence[str] = (),
                measure_rss: bool = True) -> NotebookWork:
    # "auto" batches as many consecutive chains of one model as the device's memory holds; on the GPU predicted
    # here that is all of them (the memory section below gives the largest batch's footprint)
    batches = _batched(tasks, len(tasks) if per_batch == "auto" else per_batch)
    kinds: list[KindWork] = []
    # one measurement per distinct (model, K): the first batch of that shape stands for all of them
    seen: dict[tuple, KindWork] = {}
    for batch in batches:
        key = (model_label(batch[0]), len(batch), tuple(s.label for s in batch[0].students),
               repr(batch[0].config.sampler))
        if key in seen:
            seen[key].batches += 1
            continue
        label = f"{model_label(batch[0])} x{len(batch)}"
        print(f"  {name}: measuring {label}", flush=True)
        kind = measure_kind(label, batch)
        kind.memory = batch_memory(batch, kind.state_per_chain)
        if len(batch) > 1 and measure_rss:
            kind.memory["rss"] = measured_rss(batch)
        seen[key] = kind
        kinds.append(kind)
    totals: dict[str, Totals] = {}
    for kind in kinds:
        for part, value in kind.totals().items():
            totals[part] = totals.get(part, Totals()) + value
    memory = max((k.memory for k in kinds), key=lambda m: m["device"])
    return NotebookWork(name, sum(k.K * k.batches for k in kinds),
                        sum(k.config.num_iterations * k.K * k.batches for k in kinds),
                        sum(k.student_steps_per_chain * k.K * k.batches for k in kinds), totals, memory,
                        list(notes), kinds)


def search_work(work: NotebookWork, tasks: Sequence[ChainTask], settings: E3.Experiment3Settings) -> None:
    """Experiment 3 after its chains: every pruned student's fine-tuning, evaluations and latency passes."""
    extra, steps = Totals(), 0
    for task in tasks:
        t, s = finetune_work(task, settings)
        extra, steps = extra + t, steps + s
    work.totals["after the chains"] = extra
    work.extra_steps, work.extra_label = steps, "fine-tuning steps"


def hydra_chains_work(work: NotebookWork, tasks: Sequence[ChainTask], settings: C.ComparisonSettings) -> None:
    """The comparison after its chains: Hydra on each chain's snapshots (the MNIST chain's and the spiral's)."""
    extra, steps = Totals(), 0
    for task in tasks:
        t, s = hydra_work(task, settings, spiral=isinstance(task.data, SpiralConfig))
        extra, steps = extra + t, steps + s
    work.totals["after the chains"] = extra
    work.extra_steps, work.extra_label = steps, "Hydra steps"


#: What each kind of work after the chains (a registry entry's ``after_chains``) adds to a notebook: every kind has
#: its counter (checked at import, so a new kind cannot be left uncounted).
AFTER_CHAINS: dict[AfterChains, Callable[[NotebookWork, Sequence[ChainTask], object], None]] = {
    AfterChains.SEARCH: search_work, AfterChains.HYDRA: hydra_chains_work}
assert set(AFTER_CHAINS) == set(AfterChains), f"no counter for {set(AfterChains) - set(AFTER_CHAINS)}"
#: Notes on the page beside a notebook's row.
NOTES = {"06_experiment4_uncertainty": ["OOD sets: those present here (Fashion-MNIST, masked and whole, for MNIST; "
                                        "none for CIFAR-10); KMNIST and notMNIST would add their sizes to every "
                                        "ensemble sample"]}


def all_notebooks(only: Sequence[str] = ()) -> list[NotebookWork]:
    """The work of every registered notebook that runs chains (:data:`gped_kit.experiments.registry.NOTEBOOKS`),
    under its unscaled paper profile, in the registry's order; a chain an earlier notebook runs (the same
    task) is counted there only, since the later notebook reuses it from the store. ``only``: notebook
    name prefixes."""
    out: list[NotebookWork] = []
    earlier: dict[ChainTask, str] = {}
    for entry in NOTEBOOKS.values():
        if entry.tasks is None or "paper" not in entry.profiles:
            continue
        settings = entry.settings("paper")
        tasks = entry.chain_tasks(settings)
        new = [t for t in tasks if t not in earlier]
        reused = sorted({earlier[t] for t in tasks if t in earlier})
        earlier.update({t: entry.name for t in new})
        if only and not any(entry.name.startswith(o) for o in only):
            continue
        notes = list(NOTES.get(entry.name, ()))
        if reused:
            notes.insert(0, f"{len(tasks)} cells; the {len(tasks) - len(new)} that {', '.join(reused)} runs too are "
                            "reused from the store")
        work = chains_work(entry.name, new, entry.chains_per_batch(settings), notes)
        if entry.after_chains is not None:
            AFTER_CHAINS[entry.after_chains](work, new, settings)
        out.append(work)
    return out


# ----------------------------------------------------------------------------- report
def _si(x: float, unit: str = "") -> str:
    for factor, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def _duration(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 60:
        return f"{s / 60:.0f} min"
    return f"{s:.0f} s"


def _shares(t: Totals) -> str:
    whole = t.compute_s + t.memory_s + t.launch_s
    return " / ".join(f"{100 * x / whole:.0f}%" for x in (t.compute_s, t.memory_s, t.launch_s)) if whole else "-"


def _gib(b: float) -> str:
    return f"{b / 2**30:.2f} GiB"


def markdown(works: Sequence[NotebookWork], seconds: float, peak_rss: float) -> str:
    lines = ["# The paper profile's work and a predicted time on one H100", "",
             "Written by `benchmarks/paper_profile_work.py` (see its docstring for the method). Every number of work "
             "below is **counted** on the real networks at the real sizes and batch sizes (FLOPs by "
             "`torch.utils.flop_counter.FlopCounterMode`, forward and backward); the times are a **prediction** "
             "from a roofline model, **not a measurement**. The first measurement on a GPU (NVIDIA H200, "
             "2026-11-26: notebook 01's chains with their four students in the eager engine, FCNN at about 510 "
             "SGLD steps/s and CNN-MNIST at about 385, so 10^6 steps in about 33 and 43 min, launch-bound) is in "
             "[device-runs/2026-11-26-nvidia-h200](device-runs/2026-11-26-nvidia-h200/README.md) and "
             "[device-runs/2026-11-26-nvidia-h200-2](device-runs/2026-11-26-nvidia-h200-2/README.md); in graph "
             "mode the FCNN chain ran its 10^6 steps in 378 s on an H200, mostly beside a second process on the "
             "GPU (2026-11-27, [device-runs/2026-11-27-nvidia-h200](device-runs/2026-11-27-nvidia-h200/README.md)).",
             "",
             "The paper profile has been *executed* on the CPU with only its iteration counts scaled down "
             "(`tests/test_paper_profile.py`), so every code path below runs; this page says what the unscaled "
             "runs cost.", "",
             render_deviations(), "",  # what the paper profiles do that the paper does not state
             "## In short: per notebook", "", *compact(works), "",
             "## Per notebook (paper profile, unscaled)", "",
             "| notebook | chains | SGLD steps | student steps | FLOPs per teacher step | FLOPs per student step "
             "| FLOPs in all | bytes moved per SGLD step | peak memory (device) | predicted H100 time "
             f"| at {HOST_LAUNCH_S * 1e6:.0f} us/kernel |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for w in works:
        kinds = _distinct_models(w.kinds)

        def per_kind(value: Callable[[KindWork], float], unit: str) -> str:
            values = [(k, value(k)) for k in kinds]
            if len({round(v, -3) for _, v in values}) == 1:
                return _si(values[0][1], unit)
            return "; ".join(f"{k.model}: {_si(v, unit)}" for k, v in values)

        tot = w.total
        steps = f"{w.student_steps:,}" + (f" + {w.extra_steps:,} {w.extra_label}" if w.extra_steps else "")
        lines.append(f"| {w.name} | {w.chains} | {w.sgld_steps:,} | {steps} "
                     f"| {per_kind(lambda k: sum(k.teacher.flops) / k.K, 'FLOP')} "
                     f"| {per_kind(_student_step_flops, 'FLOP')} | {_si(tot.flops, 'FLOP')} "
                     f"| {per_kind(lambda k: sum(k.teacher.bytes) / k.K, 'B')} "
                     f"| {_gib(w.memory['device'])} | {_duration(tot.seconds)} | {_duration(tot.host_seconds)} |")
    lines += ["", "Columns: *chains* computed by the notebook (run after the notebooks before it, in one store); "
              "*SGLD steps* = chains x T; *student steps* = sum over the chains' students of their Adam steps, "
              "floor((T - 1) / H) - floor(B / H) each (one per H iterations after burn-in); *FLOPs per teacher step* "
              "and *per student step* are per chain, per teacher model (a student step: S' drawn, "
              "the teacher's statistics on it, one Adam step, averaged over its students); *FLOPs in all* includes "
              "the ensemble's evaluation passes, the log-point and final evaluations and the work after the chains; "
              "*bytes moved per SGLD step* per chain (teacher step only); *peak memory* the largest batch's "
              "tensors on the device (see below).", "",
              "## Where the time goes (predicted, H100)", "",
              "| notebook | batches | teacher steps | student steps | evaluation | after the chains | time bound by "
              "compute / memory / launch | FLOPs: teacher / students / evaluation | engine-held tensors (largest "
              "batch) | device in all |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    for w in works:
        parts = {k: w.totals.get(k, Totals()) for k in ("teacher", "students", "evaluation", "after the chains")}
        batches = ", ".join(f"{k.batches} x {k.label}" for k in w.kinds)
        lines.append(f"| {w.name} | {batches} | {_duration(parts['teacher'].seconds)} "
                     f"| {_duration(parts['students'].seconds)} | {_duration(parts['evaluation'].seconds)} "
                     f"| {_duration(parts['after the chains'].seconds) if parts['after the chains'].kernels else '-'} "
                     f"| {_shares(w.total)} | {_si(parts['teacher'].flops)} / {_si(parts['students'].flops)} / "
                     f"{_si(parts['evaluation'].flops)} | {_gib(w.memory['engine'])} | {_gib(w.memory['device'])} |")
    total = Totals()
    for w in works:
        total = total + w.total
    lines += ["", f"All notebooks: {_si(total.flops, 'FLOP')}, predicted **{_duration(total.seconds)}** on one H100 "
              f"({_duration(total.host_seconds)} at {HOST_LAUNCH_S * 1e6:.0f} us per kernel). Notebooks 04 and 09 "
              "have no paper profile (they train nothing, or only their own small digits chains); notebook 08 (the "
              "thesis toys) is NumPy on the CPU and not a GPU job (its paper profile is timed by the test).", ""]
    lines += ["## Per step, per chain kind", "",
              "| notebook | kind | K | kernels per teacher step | teacher step: FLOPs / bytes (batch) | groups (H: "
              "students, FLOPs per step of the batch) | ensemble pass: FLOPs (batch) | predicted teacher step |",
              "| --- | --- | ---: | ---: | --- | --- | ---: | ---: |"]
    for w in works:
        for k in w.kinds:
            groups = "; ".join(f"{_group_label(key)}: {k.group_sizes.get(key, 0)}, {_si(sum(ops.flops))}"
                               for key, ops in k.groups.items())
            ens = sum(k.accumulate_chunk.flops) * k.num_eval / EVAL_CHUNK
            lines.append(f"| {w.name} | {k.label} | {k.K} | {len(k.teacher.flops)} | {_si(sum(k.teacher.flops))} / "
                         f"{_si(sum(k.teacher.bytes), 'B')} | {groups} | {_si(ens)} "
                         f"| {k.teacher.seconds(LAUNCH_S) * 1e3:.2f} ms |")
    lines += ["", "## Memory", "",
              "*Engine-held tensors*: `GPEDEngine.memory_bytes()` (torch's accounting: parameters, Adam state, U_o "
              "stores, ensemble sums, snapshots, and each distinct data set once as the engine's `ChainSets` stores "
              "them) for the notebook's largest batch at its real sizes. *Device in all*: that plus the chains' own "
              "data tensors, which stay referenced by their `ChainSpec`s next to the engine's concatenated copy "
              "(for a batch of chains with different data every set is held twice). Activations of one step are "
              "small beside these (M = 100; evaluation in chunks of 500 inputs). The largest batch of notebook 02 "
              "(23 FCNN or CNN chains at every |D| and mask) holds 23 distinct labelled sets, 6 masked D' and 6 "
              "masked test sets.", ""]
    rss = [(w.name, k) for w in works for k in w.kinds if "rss" in k.memory]
    if rss:
        lines += ["Measured on the CPU, as a check of the accounting: the peak RSS of a fresh process that builds "
                  "the batch at its real sizes (its chains' data, the engine) and takes a teacher step, every "
                  "group's student step and one evaluation chunk (it includes PyTorch's own ~0.3 GiB and the data "
                  "loader's transient copies):", "",
                  "| notebook | batch | device in all (accounting) | peak RSS (measured) |",
                  "| --- | --- | ---: | ---: |"]
        lines += [f"| {name} | {k.label} | {_gib(k.memory['device'])} | {_gib(k.memory['rss'])} |" for name, k in rss]
        lines.append("")
    lines += [f"This script's own peak RSS on the CPU: {_gib(peak_rss)}; it ran {seconds / 60:.1f} min.", "",
              "## Assumptions of the prediction", ""]
    lines += [f"- {a}" for a in ASSUMPTIONS]
    notes = [f"- {w.name}: {n}" for w in works for n in w.notes]
    if notes:
        lines += ["", "## Notes", "", *notes]
    return "\n".join(lines) + "\n"


def compact(works: Sequence[NotebookWork]) -> list[str]:
    """The short table: work per notebook and the predicted time (a prediction, not a measurement)."""
    lines = ["| notebook | chains | SGLD steps | student steps | FLOPs | peak memory | predicted time on one H100 |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    total = Totals()
    for w in works:
        t = w.total
        total = total + t
        steps = f"{w.student_steps / 1e6:.2f} M" + (f" + {w.extra_steps / 1e3:.0f} k {w.extra_label}"
                                                    if w.extra_steps else "")
        lines.append(f"| {w.name} | {w.chains} | {w.sgld_steps / 1e6:g} M | {steps} | {_si(t.flops)} "
                     f"| {_gib(w.memory['device'])} | {_duration(t.seconds)} ({_duration(t.host_seconds)}) |")
    lines.append(f"| all | {sum(w.chains for w in works)} | {sum(w.sgld_steps for w in works) / 1e6:g} M "
                 f"| {sum(w.student_steps for w in works) / 1e6:.1f} M | {_si(total.flops)} | "
                 f"| {_duration(total.seconds)} ({_duration(total.host_seconds)}) |")
    lines += ["", f"Predicted, not measured: a per-kernel roofline on one H100 SXM (FP32 {FP32_PEAK / 1e12:.0f} "
              f"TFLOP/s, HBM3 {HBM_BANDWIDTH / 1e12:.2f} TB/s, {LAUNCH_S * 1e6:.0f} us per kernel; in brackets "
              f"{HOST_LAUNCH_S * 1e6:.0f} us per kernel, a host-bound eager PyTorch) from FLOPs and bytes counted on "
              "the real networks at the real batch sizes; peak memory: the largest batch's tensors on the device."]
    return lines


def _group_label(key: GroupKey) -> str:
    """A distillation group (H, M', input generator, noise std, derivative matching) in words."""
    label = f"H={key.thinning}"
    if key.input_generator != "data":
        label += f" {key.input_generator} inputs"
    return label + (" + derivative" if key.matches_derivatives else "")


def _distinct_models(kinds: Sequence[KindWork]) -> list[KindWork]:
    """One kind per teacher model (the first), in order."""
    out: dict[str, KindWork] = {}
    for k in kinds:
        out.setdefault(k.model, k)
    return list(out.values())


def _student_step_flops(kind: KindWork) -> float:
    """FLOPs of one student step per chain: a group step's FLOPs over its students, averaged over all students."""
    total, n = 0.0, 0
    for key, ops in kind.groups.items():
        students = kind.group_sizes.get(key, 1)
        steps = count_after_burn_in(kind.config.num_iterations, kind.config.burn_in, key.thinning)
        total += sum(ops.flops) / kind.K * steps
        n += students * steps
    return total / max(n, 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=(), help="notebook prefixes, e.g. 02 05")
    parser.add_argument("--no-write", action="store_true", help="print the page, do not write docs/paper_profile.md")
    parser.add_argument("--output", default=str(Path(__file__).resolve().parents[1] / "docs" / "paper_profile.md"))
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    started = time.perf_counter()
    works = all_notebooks(args.only)
    page = markdown(works, time.perf_counter() - started, peak_rss())
    print(page)
    if not args.no_write:
        Path(args.output).write_text(page)
        print(f"written: {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Experiment plumbing shared by the notebooks: profiles, and a results store keyed by configuration.

**Profiles.** Each notebook has a ``profile`` parameter (``"default"``: CPU-sized settings that
run in minutes; ``"paper"``: the paper's Appendix A.2 settings, for a GPU) and one parameter per
setting whose stored value is ``None``, meaning "take it from the profile". Any of them can be
overridden one by one (papermill ``-p``, the batch runner, or by editing the cell):
:func:`resolve_parameters` merges the two.

**Results store.** :func:`run_stored` runs one chain with its students in
``results_dir/<key>/``, where ``key`` is a hash of the run's full configuration
(:meth:`GPEDRun.fingerprint`). The directory holds the checkpoint, ``config.json``,
``summary.csv`` (one tidy row per student) and ``history.csv``. Running the same configuration
again resumes an interrupted run from its checkpoint, or returns the finished result without
recomputing; ``recompute=True`` moves the old directory aside (timestamped) and starts afresh,
so nothing is lost.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from .data import ExperimentData
from .distill import GPEDConfig, GPEDResult, GPEDRun, StudentConfig

QUICKSTART_PROFILES: dict[str, dict[str, Any]] = {
    # CPU, a few minutes: short chain, students updated every 2 teacher steps so they see
    # enough minibatches in 5,000 iterations.
    "default": dict(num_iterations=5_000, burn_in=1_000, predictive_thinning=2, entropy_thinning=2,
                    eval_thinning=100, log_every=500, checkpoint_every=1_000),
    # Appendix A.2: T = 10^6, B = 1,000, H = 100 (predictive) / 10 (entropy).
    "paper": dict(num_iterations=1_000_000, burn_in=1_000, predictive_thinning=100, entropy_thinning=10,
                  eval_thinning=100, log_every=10_000, checkpoint_every=50_000),
}


def resolve_parameters(profiles: Mapping[str, Mapping[str, Any]], profile: str,
                       overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The profile's settings with every non-None override applied; unknown names are errors."""
    if profile not in profiles:
        raise ValueError(f"profile={profile!r} is not known; allowed: {sorted(profiles)}")
    params = dict(profiles[profile])
    unknown = sorted(set(overrides) - set(params))
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for these profiles; allowed: {sorted(params)}")
    params.update({k: v for k, v in overrides.items() if v is not None})
    return params


def run_key(run: GPEDRun) -> str:
    """A short, stable hash of the run's full configuration."""
    return hashlib.sha256(run.fingerprint().encode()).hexdigest()[:12]


def run_stored(data: ExperimentData, config: GPEDConfig, students: Sequence[StudentConfig],
               results_dir: str | Path, recompute: bool = False) -> GPEDResult:
    """Run (or resume, or reload) one chain and its students in the results store."""
    run = GPEDRun(data, config, students)
    key = run_key(run)
    run_dir = Path(results_dir) / key
    if recompute and run_dir.exists():
        run_dir.rename(run_dir.with_name(f"{key}.old-{time.strftime('%Y%m%d-%H%M%S')}"))
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(json.loads(run.fingerprint()), indent=2, sort_keys=True))
    result = run.run(checkpoint=run_dir / "checkpoint.pt")
    result.summary.assign(run_key=key).to_csv(run_dir / "summary.csv", index=False)
    result.history.assign(run_key=key).to_csv(run_dir / "history.csv", index=False)
    return result


def load_results(results_dir: str | Path, table: str = "summary") -> pd.DataFrame:
    """All stored runs' ``summary`` (or ``history``) rows under ``results_dir``, concatenated."""
    if table not in ("summary", "history"):
        raise ValueError(f"table={table!r}: allowed 'summary' or 'history'")
    files = sorted(Path(results_dir).glob(f"*/{table}.csv"))
    files = [f for f in files if ".old-" not in f.parent.name]
    if not files:
        return pd.DataFrame()
    return pd.concat([pd.read_csv(f) for f in files], ignore_index=True)

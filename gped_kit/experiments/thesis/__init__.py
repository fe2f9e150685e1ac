"""Papamakarios' thesis toys (paper 001, Chapter 3) as stored runs: notebook ``08_thesis_toys``.

* :mod:`.toys`: the settings and :data:`PROFILES`, the runs through the results store (:func:`run_toy`) and
  the analysis of their tables (:func:`thesis_toys_claims`, :func:`online_vs_batch`, :func:`skill_text`, the
  agreements);
* :mod:`.notebook`: what a run stores and the README's row (:data:`EXPERIMENT`).
"""

from .notebook import CLAIMS_TABLE, EXPERIMENT, claims_text, count_claims
from .toys import (
    FLOAT32_ARRAYS,
    LIST_COLUMNS,
    PROFILES,
    ThesisToysSettings,
    compact_arrays,
    dse_minimised,
    load_toy,
    logreg_agreement,
    logreg_config,
    mog_agreement,
    mog_configs,
    online_vs_batch,
    run_toy,
    skill_text,
    store_toy,
    thesis_toys_claims,
    toy_record,
)

__all__ = ["EXPERIMENT", "CLAIMS_TABLE", "claims_text", "count_claims",
           "PROFILES", "ThesisToysSettings", "mog_configs", "logreg_config",
           "toy_record", "compact_arrays", "store_toy", "load_toy", "run_toy", "online_vs_batch", "thesis_toys_claims",
           "skill_text", "dse_minimised", "mog_agreement", "logreg_agreement", "FLOAT32_ARRAYS", "LIST_COLUMNS"]

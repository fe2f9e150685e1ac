"""Which teacher sampler gets closest to the paper's Table 1 in a CPU's time (notebook ``10_samplers``).

* :mod:`.study`: the candidates, :class:`SamplerStudySettings` and :data:`PROFILES` (``default``: five samplers;
  ``pooling``: pooled chains and cyclical step sizes; ``paper``: T = 10^6), the chains
  (:func:`sampler_study_tasks`) and the study's tables (:func:`study_history`, :func:`study_table`,
  :func:`study_winners`);
* :mod:`.reading`: the notebook's reading, written from the histories (:func:`sampler_reading`);
* :mod:`.notebook`: the notebook's summary, its profiles side by side and README rows (:data:`EXPERIMENT`).
"""

from .notebook import (
    EXPERIMENT,
    PAPER_SAMPLER,
    STUDY_TABLE,
    STUDY_WINNERS,
    sampler_summary,
    sampler_table_by_profile,
)
from .reading import sampler_reading
from .study import (
    DEFAULT_CANDIDATES,
    PAPER_SGLD,
    POOLING_CANDIDATES,
    PROFILES,
    STUDENT_LABELS,
    WINNER_QUANTITIES,
    SamplerStudySettings,
    paper_row,
    sampler_study_tasks,
    study_history,
    study_per_seed,
    study_table,
    study_winners,
)

__all__ = ["EXPERIMENT", "PROFILES", "SamplerStudySettings", "DEFAULT_CANDIDATES", "POOLING_CANDIDATES", "PAPER_SGLD",
           "STUDENT_LABELS", "WINNER_QUANTITIES", "sampler_study_tasks", "study_history", "study_per_seed",
           "study_table", "study_winners", "paper_row", "sampler_summary", "sampler_table_by_profile",
           "sampler_reading", "PAPER_SAMPLER", "STUDY_TABLE", "STUDY_WINNERS"]

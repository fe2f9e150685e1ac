"""The one factory over the teacher samplers (:class:`~.sampler.SamplerName`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from .baoa import BAOAConfig
from .options import parse_option
from .sampler import SamplerConfig, SamplerName
from .sghmc import SGHMCConfig
from .sgld import SGLDConfig
from .sgnht import SGNHTConfig

#: The configuration class of each algorithm.
SAMPLERS: dict[SamplerName, type[SamplerConfig]] = {
    SamplerName.SGLD: SGLDConfig, SamplerName.SGHMC: SGHMCConfig, SamplerName.SGNHT: SGNHTConfig,
    SamplerName.BAOA: BAOAConfig,
}


def sampler_config(name: str | SamplerName, **options: Any) -> SamplerConfig:
    """The configuration of sampler ``name`` with ``options`` (its fields). An unknown name or
    option raises ``ValueError`` listing the allowed ones, before any work starts."""
    cls = SAMPLERS[parse_option(SamplerName, name, "sampler")]
    allowed = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"sampler {str(cls.name)!r} has no option(s) {unknown}; allowed: {allowed}")
    return cls(**options)

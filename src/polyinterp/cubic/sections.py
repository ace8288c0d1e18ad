"""Which part of the ``cubic:`` config each step receives (imported by workflow/rules/cubic.smk).

A step gets only the sections it uses, so that changing, say, the clamping factors reruns clamping
and not training (Snakemake reruns a job when its params change).
"""

from __future__ import annotations

from typing import Any, Mapping


def sections(cubic: Mapping[str, Any], *names: str) -> dict:
    """One name: that section's keys at top level. Several: ``{name: section}`` for each."""
    missing = [n for n in names if n not in cubic]
    if missing:
        from polyinterp.errors import ConfigError

        raise ConfigError(f"config key 'cubic.{missing[0]}' is missing; add it (see config.yaml).")
    if len(names) == 1:
        return dict(cubic[names[0]])
    return {n: cubic[n] for n in names}

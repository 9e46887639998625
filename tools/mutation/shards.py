"""The nightly rotation: which modules tonight's ``mutation`` step runs.

Core modules (``tools/mutation.toml`` ``core``) are split into :data:`CORE_SHARDS` shards,
one a night, so each is mutated whole once a week; the rest of ``impl/`` into
:data:`REST_SHARDS`, one a night, so each is mutated once every four weeks. Shards are
balanced by each module's last measured time (the baseline's ``seconds``; a module never
measured counts its line count as seconds), the longest first into the lightest shard, so
the night's two shards fit the step's budget. Rules of this file: a pure function of the
date, the module list and the baseline; the same night always picks the same modules.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from collections.abc import Sequence

CORE_SHARDS = 7
REST_SHARDS = 28


def split(modules: Sequence[str], cost: Mapping[str, float], shards: int) -> list[list[str]]:
    """``modules`` in ``shards`` groups of about equal total cost (greedy, deterministic)."""
    groups: list[list[str]] = [[] for _ in range(shards)]
    loads = [0.0] * shards
    for module in sorted(modules, key=lambda m: (-cost[m], m)):
        lightest = min(range(shards), key=lambda i: (loads[i], i))
        groups[lightest].append(module)
        loads[lightest] += cost[module]
    return [sorted(group) for group in groups]


def tonight(
    day: datetime.date,
    core: Sequence[str],
    rest: Sequence[str],
    cost: Mapping[str, float],
) -> list[str]:
    """The modules the night of ``day`` runs: one core shard and one shard of the rest."""
    ordinal = day.toordinal()
    core_shard = split(core, cost, CORE_SHARDS)[ordinal % CORE_SHARDS]
    rest_shard = split(rest, cost, REST_SHARDS)[ordinal % REST_SHARDS]
    return [*core_shard, *rest_shard]

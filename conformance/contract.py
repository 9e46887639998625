"""The attempt states and their legal edges as the source states them (SPEC.md section 5),
written once for the tests and independently of :mod:`runstore.edges`, whose table
``conformance/values/test_rules.py`` holds equal to this one, and which the schema's
triggers are tested against (``conformance/schema/``)."""

from __future__ import annotations

import itertools
from typing import Final

PHASES: Final = (
    "reserved",
    "materializing",
    "starting",
    "preparing",
    "executing",
    "checkpointing",
    "validating",
    "evaluating",
)
"""The nonterminal states before finalizing, in the order of the longest execution."""
TERMINAL_STATES: Final = ("accepted", "censored", "superseded", "failed")
STATES: Final = (*PHASES, "finalizing", *TERMINAL_STATES)

EDGES: Final = frozenset(
    {
        *itertools.pairwise(PHASES),  # the longest execution, step by step
        ("executing", "validating"),  # skipping checkpoints
        ("evaluating", "executing"),  # the evaluate-execute loop
        *((phase, "finalizing") for phase in PHASES),
        *(("finalizing", end) for end in TERMINAL_STATES),
    }
)
"""Every legal edge (source state, target state)."""

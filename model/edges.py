"""The attempt state machine's legal edges, as data.

Rules of this file: this is the one place where the legal attempt edges are written down.
Everything else (the model's operations, the writer, the schema triggers' tests, the
SPEC's generated table) reads them from here. States are the string values of
``runstore.records.AttemptState``; this module imports nothing from the package so that
tools can read the table without the rest of the runtime.
"""

from __future__ import annotations

from collections.abc import Mapping

# The execution phases, in their usual order. Every one of them may move to finalizing.
EXECUTION_PHASES: tuple[str, ...] = (
    "reserved",
    "materializing",
    "starting",
    "preparing",
    "executing",
    "checkpointing",
    "validating",
    "evaluating",
)
FINALIZING = "finalizing"
TERMINAL_STATES: tuple[str, ...] = ("accepted", "censored", "superseded", "failed")
ALL_STATES: tuple[str, ...] = (*EXECUTION_PHASES, FINALIZING, *TERMINAL_STATES)

# The state every attempt is created in (revision 0, from no state).
INITIAL_STATE = "reserved"

# state -> the states it may move to (h11 style). Revision 0 (nothing -> reserved) is the
# reservation itself and is not an edge of this table.
_EXECUTION_NEXT: Mapping[str, tuple[str, ...]] = {
    "reserved": ("materializing",),
    "materializing": ("starting",),
    "starting": ("preparing",),
    "preparing": ("executing",),
    "executing": ("checkpointing", "validating"),
    "checkpointing": ("validating",),
    "validating": ("evaluating",),
    # Another checkpoint round.
    "evaluating": ("executing",),
}

NEXT_STATES: Mapping[str, tuple[str, ...]] = {
    **{phase: (*_EXECUTION_NEXT[phase], FINALIZING) for phase in EXECUTION_PHASES},
    FINALIZING: TERMINAL_STATES,
    **{terminal: () for terminal in TERMINAL_STATES},
}

LEGAL_EDGES: frozenset[tuple[str, str]] = frozenset(
    (source, target) for source, targets in NEXT_STATES.items() for target in targets
)
"""Every legal attempt edge as (from_state, to_state); each one raises revision by one."""

EXECUTION_EDGES: frozenset[tuple[str, str]] = frozenset(
    (source, target) for source, target in LEGAL_EDGES if target in EXECUTION_PHASES
)
"""The edges ``advance`` may take: those that end in an execution phase. Finalizing is
entered only by ``begin_finalization`` (or recovery), terminal states only by
``commit_finalization`` (or recovery)."""


def is_legal_edge(source: str, target: str) -> bool:
    """Whether ``source -> target`` is an edge of the attempt state machine.

    post: __return__ == ((source, target) in LEGAL_EDGES)
    post: implies(__return__, source not in TERMINAL_STATES)
    post: implies(__return__ and target in TERMINAL_STATES, source == FINALIZING)
    post: implies(__return__ and target == FINALIZING, source in EXECUTION_PHASES)
    post: implies(__return__, source != target)
    """
    return target in NEXT_STATES.get(source, ())


def is_execution_edge(source: str, target: str) -> bool:
    """Whether ``advance`` may take ``source -> target``.

    post: __return__ == ((source, target) in EXECUTION_EDGES)
    post: implies(__return__, is_legal_edge(source, target))
    post: implies(__return__, target != FINALIZING and target not in TERMINAL_STATES)
    """
    return source in _EXECUTION_NEXT and target in _EXECUTION_NEXT[source]


def implies(premise: bool, conclusion: bool) -> bool:
    """Material implication, for the contracts above."""
    return (not premise) or conclusion


def edge_table_markdown() -> str:
    """The legal edges as a Markdown table built from :data:`LEGAL_EDGES`, one row per
    state in :data:`ALL_STATES` order (for SPEC.md)."""
    lines = ["| from | may move to |", "| --- | --- |"]
    for source in ALL_STATES:
        targets = [f"`{target}`" for target in ALL_STATES if (source, target) in LEGAL_EDGES]
        lines.append(f"| `{source}` | {', '.join(targets) or '(terminal: none)'} |")
    return "\n".join(lines) + "\n"

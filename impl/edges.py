"""The attempt state machine's legal edges, as data over :class:`AttemptState`.

Rules of this file: this is the one place where the legal attempt edges are written down.
The model's operations, the writer, the schema triggers' tests and SPEC.md's generated table
all read them from here; the schema's triggers are a third, independent encoding of the same
table (``conformance/schema/test_attempts.py`` checks them against it). Value layer: imports
only :mod:`runstore.enums`. The predicates carry PEP 316 contracts that
``crosshair check runstore.edges`` verifies.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from runstore.enums import TERMINAL_STATES  # noqa: F401 (the contracts use it)
from runstore.enums import AttemptState

S = AttemptState

EXECUTION_PHASES: Final[tuple[AttemptState, ...]] = (
    S.RESERVED,
    S.MATERIALIZING,
    S.STARTING,
    S.PREPARING,
    S.EXECUTING,
    S.CHECKPOINTING,
    S.VALIDATING,
    S.EVALUATING,
)
"""The execution phases, in their usual order. Every one of them may move to finalizing."""

TERMINAL_ORDER: Final[tuple[AttemptState, ...]] = (S.ACCEPTED, S.CENSORED, S.SUPERSEDED, S.FAILED)
"""The terminal states, in the order tables list them."""

ALL_STATES: Final[tuple[AttemptState, ...]] = (*EXECUTION_PHASES, S.FINALIZING, *TERMINAL_ORDER)

# state -> the execution phases it may move to (h11 style). Revision 0 (nothing -> reserved)
# is the reservation itself and is not an edge of this table.
_EXECUTION_NEXT: Final[Mapping[AttemptState, tuple[AttemptState, ...]]] = MappingProxyType(
    {
        S.RESERVED: (S.MATERIALIZING,),
        S.MATERIALIZING: (S.STARTING,),
        S.STARTING: (S.PREPARING,),
        S.PREPARING: (S.EXECUTING,),
        S.EXECUTING: (S.CHECKPOINTING, S.VALIDATING),
        S.CHECKPOINTING: (S.VALIDATING,),
        S.VALIDATING: (S.EVALUATING,),
        S.EVALUATING: (S.EXECUTING,),  # another checkpoint round
    }
)

NEXT_STATES: Final[Mapping[AttemptState, tuple[AttemptState, ...]]] = MappingProxyType(
    {
        **{phase: (*_EXECUTION_NEXT[phase], S.FINALIZING) for phase in EXECUTION_PHASES},
        S.FINALIZING: TERMINAL_ORDER,
        **{terminal: () for terminal in TERMINAL_ORDER},
    }
)
"""Every state -> the states it may move to."""

LEGAL_EDGES: Final[frozenset[tuple[AttemptState, AttemptState]]] = frozenset(
    (source, target) for source, targets in NEXT_STATES.items() for target in targets
)
"""Every legal attempt edge as ``(from_state, to_state)``; each one raises revision by one.
``AttemptState`` is a ``StrEnum``, so a pair of state strings tests equal to its edge."""

EXECUTION_EDGES: Final[frozenset[tuple[AttemptState, AttemptState]]] = frozenset(
    (source, target) for source, target in LEGAL_EDGES if target in EXECUTION_PHASES
)
"""The edges between execution phases. ``advance`` takes these and also enters finalizing
without contending (:func:`is_advance_edge`); ``begin_finalization`` enters finalizing as a
success contender; terminal states are reached only by ``commit_finalization`` (or
recovery)."""


def is_legal_edge(source: AttemptState, target: AttemptState) -> bool:
    """Whether ``source -> target`` is an edge of the attempt state machine.

    post: __return__ == ((source, target) in LEGAL_EDGES)
    post: implies(__return__, source not in TERMINAL_STATES)
    post: implies(__return__ and target in TERMINAL_STATES, source == AttemptState.FINALIZING)
    post: implies(__return__ and target == AttemptState.FINALIZING, source in EXECUTION_PHASES)
    post: implies(__return__, source != target)
    """
    return target in NEXT_STATES.get(source, ())


def is_execution_edge(source: AttemptState, target: AttemptState) -> bool:
    """Whether ``advance`` may take ``source -> target``.

    post: __return__ == ((source, target) in EXECUTION_EDGES)
    post: implies(__return__, is_legal_edge(source, target))
    post: implies(__return__, target != AttemptState.FINALIZING)
    post: implies(__return__, target not in TERMINAL_STATES)
    """
    return target in _EXECUTION_NEXT.get(source, ())


def is_advance_edge(source: AttemptState, target: AttemptState) -> bool:
    """Whether ``advance`` may take ``source -> target``: an execution edge, or any
    execution phase into finalizing (without contending for the slot's claim).

    post: implies(__return__, is_legal_edge(source, target))
    post: implies(__return__, target not in TERMINAL_STATES)
    post: __return__ == (is_legal_edge(source, target) and source != AttemptState.FINALIZING)
    """
    return is_execution_edge(source, target) or (
        target == AttemptState.FINALIZING and can_finalize(source)
    )


def can_finalize(state: AttemptState) -> bool:
    """Whether an attempt in ``state`` may enter finalizing (any execution phase may).

    post: __return__ == is_legal_edge(state, AttemptState.FINALIZING)
    post: implies(__return__, state in EXECUTION_PHASES)
    """
    return state in _EXECUTION_NEXT


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

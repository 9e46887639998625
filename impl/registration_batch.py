"""The rules of a registration batch (``register_many``) that do not need a store: its
items, its limits, and how a refusal names the item it concerns.

Rules of this file: value layer; pure functions of the arguments (already type-checked by
:func:`runstore.arguments.register_many_arguments`). A batch is a sequence of items, each
either an exclusion (an :class:`~runstore.records.ApplicabilityDecision`, as
``register_exclusion`` takes it) or a slot registration (a ``(decision, run, attempt_slot,
observation_slots)`` tuple, as ``register_slots`` takes it). The writer
(:mod:`runstore.store.registration_batch`) and the model
(:func:`runstore.model.registration.register_many`) both call these, so the batch's own
rules exist once; what needs the database or the model's state (conflicts, the held count)
stays with each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final
from typing import TypeAlias

from runstore.errors import InvalidRecordError
from runstore.errors import OutOfRangeError
from runstore.errors import RegistrationConflictError
from runstore.errors import RunStoreError
from runstore.records import ApplicabilityDecision
from runstore.records import AttemptSlot
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun
from runstore.rules import range_refusal
from runstore.shapes import exclusion_refusal
from runstore.shapes import registration_refusal
from runstore.validation import check_text

MAX_ITEMS: Final = 20_000
"""The most items one batch takes (``out_of_range`` beyond): a batch is one write
transaction, and a bound on its size bounds how long it holds the store's write lock."""

SlotItem: TypeAlias = tuple[
    ApplicabilityDecision, ResolvedRun, AttemptSlot, Sequence[ObservationSlot]
]
Item: TypeAlias = ApplicabilityDecision | SlotItem


def batch_refusal(
    items: Sequence[object], candidate_ids: Sequence[str], held: int | None
) -> RunStoreError | None:
    """``out_of_range`` for more than :data:`MAX_ITEMS` items, then for a ``held`` count
    outside 0..2**53-1; then ``invalid_record`` for a candidate id no record can have (the
    records' text rule: nonempty, at most 256 characters, no control character or lone
    surrogate, which SQLite could not even bind)."""
    if len(items) > MAX_ITEMS:
        return OutOfRangeError(f"register_many takes at most {MAX_ITEMS} items, not {len(items)}")
    refusal = None if held is None else range_refusal(indices=[("held", held)])
    for index, candidate_id in enumerate(candidate_ids):
        if refusal is not None:
            break
        try:
            check_text(candidate_id, f"candidate_ids[{index}]")
        except InvalidRecordError as error:
            refusal = error
    return refusal


def item_refusal(index: int, item: Item) -> RunStoreError | None:
    """The argument checks of item ``index``, as its own call makes them
    (:func:`~runstore.shapes.exclusion_refusal` or
    :func:`~runstore.shapes.registration_refusal`), named by :func:`named`."""
    if isinstance(item, ApplicabilityDecision):
        refusal = exclusion_refusal(item)
    else:
        refusal = registration_refusal(*item)
    return None if refusal is None else named(index, refusal)


def named(index: int, refusal: RunStoreError) -> RunStoreError:
    """``refusal`` (same class, so same code) with its message prefixed ``items[i]: ``."""
    return type(refusal)(f"items[{index}]: {refusal.message}")


def held_refusal(found: int, held: int) -> RunStoreError:
    """``registration_conflict``: the batch was planned against ``held`` registered
    decisions and runs of its candidates, and the store holds ``found``: someone registered
    records for them since the caller read them."""
    return RegistrationConflictError(
        f"the candidates hold {found} registered decisions and runs, not the {held} "
        "this batch was planned against: read them again"
    )


ATTEMPT_KEY_CONFLICT: Final = "a logical slot of this run is registered with another record"
OTHER_MEMBERS: Final = "the attempt slot is registered with other observation slots"
"""The conflict messages of one registration (the writer's and the model's)."""

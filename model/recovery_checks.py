"""Recovery's checks of a candidate outcome in the model: whether an unregistered attempt
object's ``outcome.json`` may be imported as a recoverable attempt's terminal outcome
(SPEC.md section 14, "Validating a candidate").

Rules of this file: pure functions of the model's state and the candidate's claims; no
I/O. The object-level checks (``corrupt``, ``malformed_outcome``, ``unknown_attempt``,
``attempt_terminal``) are the pass's (:mod:`runstore.model.recovery`), since they decide
which attempt a candidate belongs to; this file checks the rest, in the table's order. The
store's counterpart is :mod:`runstore.store.recovery.recover_tx` (over SQL): the two are compared by
the lockstep tests, not shared.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeAlias

from runstore import recovery_report as codes
from runstore import rules
from runstore.enums import AttemptState
from runstore.model.finalization import acceptance_refusal
from runstore.model.finalization import finalizing_decision
from runstore.model.outcome_document import outcome_document
from runstore.model.state import AttemptRow
from runstore.model.state import LeaseRow
from runstore.model.state import ModelState
from runstore.outcome_json import OutcomeClaim
from runstore.requests import LEASED_ROOT_ROLE
from runstore.requests import Accepted
from runstore.requests import Censored
from runstore.requests import Reference
from runstore.requests import Superseded
from runstore.requests import interrupted_claims

Rejection: TypeAlias = tuple[str, str]
"""``(code, message)``: the first check a candidate failed."""


def leased_roots(state: ModelState, attempt_id: str) -> tuple[Reference, ...]:
    """A ``leased_root`` reference to every artifact rooted under any lease of the
    attempt, sorted by artifact id, each once."""
    lease_ids = {lease.id for lease in state.attempt_leases(attempt_id)}
    roots = {
        artifact_id for lease_id, artifact_id in state.leased_artifacts if lease_id in lease_ids
    }
    return tuple(Reference(LEASED_ROOT_ROLE, artifact_id) for artifact_id in sorted(roots))


def cause_at(state: ModelState, attempt: AttemptRow, now_ns: int) -> str | None:
    """The attempt's recovery cause at ``now_ns`` (already clamped), None while its owner
    keeps authority (:func:`runstore.rules.recovery_cause`)."""
    reservation = state.reservation_lease(attempt.id)
    claim = state.owned_claim(attempt.id)
    claim_lease = None if claim is None else state.leases[claim.lease_id]
    return rules.recovery_cause(
        reservation.expires_at_ns,
        reservation.released_at_ns is not None,
        None if claim_lease is None else claim_lease.expires_at_ns,
        claim_lease is not None and claim_lease.released_at_ns is not None,
        now_ns,
    )


def _live_at(lease: LeaseRow, at_ns: int) -> bool:
    """Whether ``lease`` was live at ``at_ns`` (:func:`runstore.rules.lease_live_at`)."""
    return rules.lease_live_at(lease.expires_at_ns, lease.released_at_ns, at_ns)


def owner_refusal(state: ModelState, attempt: AttemptRow, claim: OutcomeClaim) -> str | None:
    """Why the attempt's owner could not have committed ``claim`` at its finish time, or
    None: the reservation lease, and the lease of a claim the attempt holds, live then; the
    outcome permitted by how it entered finalizing; for ``Accepted``, the slot's claim held
    through a lease of the reservation's owner."""
    finished = claim.finished_at_ns
    reservation = state.reservation_lease(attempt.id)
    held = state.owned_claim(attempt.id)
    held_lease = None if held is None else state.leases[held.lease_id]
    if not _live_at(reservation, finished):
        return "the reservation lease was not live at the finish time"
    if held_lease is not None and not _live_at(held_lease, finished):
        return "the claim's lease was not live at the finish time"
    refusal = rules.outcome_refusal(
        finalizing_decision(state, attempt),
        isinstance(claim.outcome, Accepted),
        isinstance(claim.outcome, Superseded),
    )
    if refusal is not None:
        return refusal.message
    if isinstance(claim.outcome, Accepted) and (
        held_lease is None or held_lease.owner_token != reservation.owner_token
    ):
        return "the attempt holds no claim of its reservation owner"
    return None


def recovery_authored(state: ModelState, attempt: AttemptRow, claim: OutcomeClaim) -> bool:
    """Whether ``claim`` is an interrupted failure recovery itself may have written: its
    cause the attempt's recovery cause at the finish time and its dependencies exactly the
    attempt's ``leased_root`` references (the finish time is checked by the caller)."""
    claims = interrupted_claims(claim.outcome)
    if claims is None:
        return False
    cause = cause_at(state, attempt, claim.finished_at_ns)
    return cause == claims[0] and claim.references == leased_roots(state, attempt.id)


def _observation_artifacts(state: ModelState, observation_id: str) -> Iterator[str]:
    """The observation's own directory, then the artifacts it references."""
    yield state.observations[observation_id].artifact_id
    for owner, _, artifact_id in sorted(state.observation_artifacts):
        if owner == observation_id:
            yield artifact_id


def evidence_artifacts(
    state: ModelState, attempt: AttemptRow, claim: OutcomeClaim
) -> Iterator[str]:
    """Every registered artifact the document's evidence names: its dependencies, the
    directories of the observations its snapshot lists (produced ones, and selected ones
    for accepted and censored outcomes) and of their references."""
    yield from (reference.artifact_id for reference in claim.references)
    listed = sorted(
        row.observation.id
        for row in state.observations.values()
        if row.observation.attempt_id == attempt.id
    )
    if isinstance(claim.outcome, Accepted | Censored):
        for member in state.member_slots(attempt.slot_id):
            if member.id in state.selections:
                listed.append(state.selections[member.id].observation_id)
    for observation_id in listed:
        yield from _observation_artifacts(state, observation_id)


def rejection(
    state: ModelState,
    attempt: AttemptRow,
    claim: OutcomeClaim,
    data: bytes,
    corrupt: frozenset[str],
) -> Rejection | None:
    """The first check, from ``not_finalizing`` to ``dependency_corrupt``, that the
    candidate whose ``outcome.json`` is ``data`` (read as ``claim``) fails for the
    recoverable ``attempt``; None when it passes them all. ``corrupt`` holds the ids of the
    registered artifacts that no longer verify on disk."""
    if attempt.state is not AttemptState.FINALIZING:
        return codes.NOT_FINALIZING, f"the attempt is {attempt.state.value}"
    for role, artifact_id in (reference.pair for reference in claim.references):
        if artifact_id not in state.artifacts:
            return codes.UNKNOWN_ARTIFACT, f"{role} artifact {artifact_id} is unknown"
    rebuilt = outcome_document(
        state, attempt.id, claim.outcome, claim.references, claim.finished_at_ns
    )
    if rebuilt != data:
        return codes.EVIDENCE_MISMATCH, "the records no longer match its outcome.json"
    if claim.finished_at_ns < attempt.updated_at_ns:
        return codes.NOT_AUTHORIZED, "it finished before the attempt's last transition"
    unauthorized = owner_refusal(state, attempt, claim)
    if unauthorized is not None and not recovery_authored(state, attempt, claim):
        return codes.NOT_AUTHORIZED, unauthorized
    if isinstance(claim.outcome, Accepted):
        unsatisfied = acceptance_refusal(state, attempt)
        if unsatisfied is not None:
            return codes.ACCEPTANCE_UNSATISFIED, unsatisfied.message
    for artifact_id in evidence_artifacts(state, attempt, claim):
        if artifact_id in corrupt:
            return codes.DEPENDENCY_CORRUPT, f"artifact {artifact_id} no longer verifies"
    return None

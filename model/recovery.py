"""Recovery's decision: which attempts are recoverable at time t, and what recovery
commits for each when no verified published outcome can be imported.

Rules of this file: pure functions. Orphan import, stage quarantine and filesystem locks
are outside the model; the caller supplies the registration of the canonical failure
outcome directory it published for each recovered attempt.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
from runstore import arguments, payloads, rules
from runstore.enums import TERMINAL_STATES, ArtifactKind, AttemptState
from runstore.errors import InvalidRecordError, RegistrationConflictError, UnknownArtifactError
from runstore.model.artifacts import with_artifact
from runstore.model.attempts import transition
from runstore.model.finalization import finish
from runstore.model.state import ModelState, Refusal, refuse, refused
from runstore.receipts import TerminalAttempt
from runstore.records import ArtifactRegistration
from runstore.requests import interrupted_outcome
from runstore.shapes import LEASED_ROOT_ROLE


@attrs.frozen(kw_only=True)
class Recoverable:
    """A nonterminal attempt whose owner lost authority, and the first reason found."""

    attempt_id: str
    cause: str


def recoverable(state: ModelState, t_ns: int) -> tuple[Recoverable, ...]:
    """The nonterminal attempts, in attempt id order, whose reservation lease or owned
    claim lease is released or expired at ``t_ns`` (expiry is exclusive: a lease expiring
    at ``t_ns`` is expired). The cause names the first of: reservation released,
    reservation expired, claim released, claim expired. Live owners are never recoverable.
    """
    found = []
    for attempt in sorted(state.attempts.values(), key=lambda row: row.id):
        if attempt.state in TERMINAL_STATES:
            continue
        now = rules.effective_now(t_ns, attempt.updated_at_ns)
        reservation = state.reservation_lease(attempt.id)
        claim = state.owned_claim(attempt.id)
        claim_lease = None if claim is None else state.leases[claim.lease_id]
        cause = rules.recovery_cause(
            reservation.expires_at_ns,
            reservation.released_at_ns is not None,
            None if claim_lease is None else claim_lease.expires_at_ns,
            claim_lease is not None and claim_lease.released_at_ns is not None,
            now,
        )
        if cause is not None:
            found.append(Recoverable(attempt_id=attempt.id, cause=cause))
    return tuple(found)


def recover(
    state: ModelState, t_ns: int, artifacts: Mapping[str, ArtifactRegistration]
) -> tuple[ModelState, tuple[TerminalAttempt, ...] | Refusal]:
    """Finalize every recoverable attempt (see :func:`recoverable`) as an interrupted
    failure; ``artifacts`` maps each one's id to its published failure outcome directory.

    For each attempt in id order, at ``max(t_ns, attempt.updated_at_ns)``: move to
    finalizing if it is not there yet (an ``attempt_finalizing`` event without a ``claim``
    key), then commit :func:`runstore.requests.interrupted_outcome` as ``commit_finalization`` does
    (transition, ``attempt_finished`` event, claim deleted, every lease released), with a
    ``leased_root`` reference to each artifact rooted under one of its leases. Owner
    tokens are never changed and no lease is renewed.

    Check order (all before anything is committed): ``out_of_range`` (``t_ns``), then per
    attempt ``unknown_artifact`` (no registration supplied), ``invalid_record`` (not of
    kind attempt), ``registration_conflict`` (other digests, or already another
    attempt's final artifact). With nothing recoverable it commits nothing
    and returns no receipts, so running it again is harmless. Result: the receipts, in
    attempt id order.
    """
    error = arguments.recover_arguments(t_ns)
    if error is not None:
        return state, refused(error)
    error = rules.range_refusal(ns=[("t_ns", t_ns)])
    if error is not None:
        return state, refused(error)
    work = state
    receipts = []
    for item in recoverable(state, t_ns):
        artifact = artifacts.get(item.attempt_id)
        if artifact is None:
            return state, refuse(UnknownArtifactError, f"no outcome for {item.attempt_id}")
        if artifact.kind is not ArtifactKind.ATTEMPT:
            return state, refuse(InvalidRecordError, "the outcome artifact must be of kind attempt")
        registered = with_artifact(work, artifact)
        if isinstance(registered, Refusal):
            return state, registered
        if any(row.final_artifact_id == artifact.id for row in work.attempts.values()):
            return state, refuse(
                RegistrationConflictError, f"artifact {artifact.id} is another attempt's final one"
            )
        attempt = work.attempts[item.attempt_id]
        interrupted_state = attempt.state
        now = rules.effective_now(t_ns, attempt.updated_at_ns)
        if attempt.state is not AttemptState.FINALIZING:
            payload = payloads.finalizing_payload(attempt.state, attempt.revision + 1, None)
            work, attempt, _ = transition(
                work, attempt, now, AttemptState.FINALIZING, payloads.ATTEMPT_FINALIZING, payload
            )
        lease_ids = {lease.id for lease in work.attempt_leases(attempt.id)}
        roots = sorted(
            (LEASED_ROOT_ROLE, artifact_id)
            for lease_id, artifact_id in work.leased_artifacts
            if lease_id in lease_ids
        )
        outcome = interrupted_outcome(item.cause, interrupted_state)
        work, receipt = finish(
            work, attempt, now, now, outcome, artifact, tuple(dict.fromkeys(roots))
        )
        receipts.append(receipt)
    return work, tuple(receipts)

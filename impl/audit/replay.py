"""Replaying a store's committed event log through the executable model (SPEC.md section 16.2).

Rules of this file: pure over a :class:`~runstore.audit.stored.Stored` value; no I/O. The
replay starts from an empty model state, registers the stored records and artifacts (they
append no event), then turns each event, in sequence order, back into the writer or
recovery call that appended it, with the arguments the stored rows hold, and applies it
with the model's own operation, so every rule the model knows is checked again: legal
edges, retry authorization, one claim and one acceptance per slot, first selection final,
liveness of leases at each time, outcomes permitted by the way into finalizing, acceptance
rules, and recovery only of owners that lost authority. The first refusal, or the first
event whose replayed row differs from the stored one, is the divergence reported.

What the log cannot show is supplied from the stored rows, as SPEC states: renewals append
no event, so each lease is granted its stored (final) expiry from the start; staging leases
are inserted as stored, in fencing-token order; artifacts and their roots are registered
up front.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import attrs
from runstore import canonical
from runstore import payloads
from runstore import rules
from runstore.canonical import JSON
from runstore.enums import AttemptState
from runstore.enums import LeasePurpose
from runstore.errors import InvalidRecordError
from runstore.model import ModelState
from runstore.model import Refusal
from runstore.model import advance
from runstore.model import begin_finalization
from runstore.model import commit_finalization
from runstore.model import register_observation
from runstore.model import register_slots
from runstore.model import reserve
from runstore.model.artifacts import with_artifact
from runstore.model.finalization import finish
from runstore.model.finalization import finishing_refusal
from runstore.model.recovery import Recoverable
from runstore.model.recovery import interrupted_failure
from runstore.model.recovery_checks import cause_at
from runstore.model.state import AttemptRow
from runstore.model.state import put
from runstore.receipts import OwnedAttempt
from runstore.requests import Accepted
from runstore.requests import Censored
from runstore.requests import Failed
from runstore.requests import FirstAttempt
from runstore.requests import LeaseRequest
from runstore.requests import Reference
from runstore.requests import Retry
from runstore.requests import RetryAuthorization
from runstore.requests import Superseded
from runstore.requests import TerminalOutcome
from runstore.requests import interrupted_claims

from .stored import Stored
from .stored import StoredEvent


@attrs.frozen(kw_only=True)
class Divergence:
    """Where the replay and the store part: ``sequence`` is the event (None before the
    first or after the last), ``code`` one of :data:`DIVERGENCE_CODES`."""

    code: str
    sequence: int | None
    attempt_id: str | None
    message: str

    def to_json(self) -> dict[str, JSON]:
        return attrs.asdict(self)  # strings and an int, in the order declared


DIVERGENCE_CODES = (
    "unreadable",  # a stored row the value layer refuses to rebuild
    "registration_refused",  # the model refuses a stored registration
    "event_unexplained",  # an event the replay cannot turn back into a call
    "event_refused",  # the model refuses the call the event records
    "event_differs",  # the replayed event row differs from the stored one
    "attempt_differs",  # after its last event, an attempt's row differs
    "projection_differs",  # after the last event, a table differs
)


class Diverged(Exception):
    def __init__(self, divergence: Divergence) -> None:
        super().__init__(divergence.message)
        self.divergence = divergence


def _fail(code: str, event: StoredEvent | None, message: str) -> Diverged:
    return Diverged(
        Divergence(
            code=code,
            sequence=None if event is None else event.reported,
            attempt_id=None if event is None else event.attempt_id,
            message=message,
        )
    )


def outcome_of(event: StoredEvent) -> TerminalOutcome:
    """The terminal outcome an ``attempt_finished`` payload records."""
    payload = event.payload
    target = payload.get("to")
    try:
        if target == AttemptState.ACCEPTED.value:
            return Accepted()
        if target == AttemptState.SUPERSEDED.value:
            return Superseded()
        if target == AttemptState.CENSORED.value:
            return Censored(reason=payload["reason"])  # type: ignore[arg-type]
        if target == AttemptState.FAILED.value:
            return Failed(code=payload["failure_code"], details=payload["details"])  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError) as error:
        raise _fail("event_unexplained", event, f"its outcome cannot be read: {error}") from None
    raise _fail("event_unexplained", event, f"it finishes in {target!r:.40}, not a terminal state")


class Replay:
    """One replay: the model state and the stored rows it draws arguments from."""

    def __init__(self, stored: Stored) -> None:
        self.stored = stored
        self.state = ModelState()
        self._stages = sorted(
            (row for rows in stored.leases.values() for row in rows if row.purpose is _STAGING),
            key=lambda row: row.fencing_token,
        )
        self._next_stage = 0
        self.recovering: dict[str, StoredEvent] = {}
        """Attempts recovery moved to finalizing: their event, replayed with the commit."""

    # --- before the first event ------------------------------------------------------

    def register(self) -> None:
        """Register every attempt slot (with its decision, run and observation slots) and
        every artifact, in id order."""
        stored = self.stored
        for slot_id in sorted(stored.attempt_slots):
            slot = stored.attempt_slots[slot_id]
            run = stored.runs.get(slot.run_id)
            decision = None if run is None else stored.decisions.get(run.decision_id)
            if run is None or decision is None:
                raise _fail("registration_refused", None, f"{slot_id} has no stored run/decision")
            self.state, result = register_slots(
                self.state, decision, run, slot, stored.members.get(slot_id, [])
            )
            if isinstance(result, Refusal):
                raise _fail("registration_refused", None, f"{slot_id}: {_said(result)}")
        needed = stored.artifacts if stored.needed is None else stored.needed
        for artifact_id in sorted(needed):
            registration = stored.artifacts.get(artifact_id)
            if registration is None:
                message = f"artifact {artifact_id} is named but not registered"
                raise _fail("registration_refused", None, message)
            added = with_artifact(self.state, registration)
            if isinstance(added, Refusal):
                raise _fail("registration_refused", None, f"{artifact_id}: {_said(added)}")
            self.state = added

    # --- one event -------------------------------------------------------------------

    def apply(self, event: StoredEvent) -> None:
        """Replay ``event``; raises :class:`Diverged` on a refusal or a differing row."""
        handler = _HANDLERS.get(event.kind)
        if handler is None:
            raise _fail("event_unexplained", event, f"unknown event kind {event.kind!r:.40}")
        if event.attempt_id is None or (
            event.kind != payloads.ATTEMPT_RESERVED and event.attempt_id not in self.state.attempts
        ):
            raise _fail("event_unexplained", event, "it names no reserved attempt")
        self.seed_stages()
        before = len(self.state.events)
        handler(self, event)
        self.seed_stages()
        self._compare_events(event, before)

    def _compare_events(self, event: StoredEvent, before: int) -> None:
        appended = self.state.events[before:]
        if event.attempt_id in self.recovering and not appended:
            return  # recovery's move to finalizing: replayed with its terminal commit
        stored_rows = [event]
        if len(appended) == 2:  # recovery's move and terminal commit, replayed together
            stored_rows = [self.recovering.pop(str(event.attempt_id)), event]
        if len(appended) != len(stored_rows):
            message = f"the replayed call appended {len(appended)} events, the store 1"
            raise _fail("event_differs", event, message)
        for model_row, stored_row in zip(appended, stored_rows, strict=True):
            replayed = (
                model_row.sequence,
                model_row.kind,
                model_row.attempt_id,
                model_row.at_ns,
                canonical.encode(dict(model_row.payload)),
            )
            kept = (
                stored_row.sequence,
                stored_row.kind,
                stored_row.attempt_id,
                stored_row.at_ns,
                canonical.encode(stored_row.payload),
            )
            if replayed != kept:
                message = f"stored {_short(kept)}, replayed {_short(replayed)}"
                raise _fail("event_differs", stored_row, message)

    # --- helpers ---------------------------------------------------------------------

    def guard(self, attempt_id: str) -> OwnedAttempt:
        """The owner's current guard of ``attempt_id`` in the replayed state."""
        row = self.state.attempts[attempt_id]
        reservation = self.state.reservation_lease(attempt_id)
        claim = self.state.owned_claim(attempt_id)
        return OwnedAttempt(
            attempt_id=row.id,
            slot_id=row.slot_id,
            retry_index=row.retry_index,
            state=row.state,
            revision=row.revision,
            owner_token=reservation.owner_token,
            lease_id=reservation.id,
            claim_lease_id=None if claim is None else claim.lease_id,
        )

    def seed_stages(self, *, every: bool = False) -> None:
        """Insert the stored staging leases whose fencing token is the next one (all that
        are left when ``every``), as stored, except that a stage released by its attempt's
        terminal commit is inserted unreleased so the replayed commit releases it. Tokens
        are consecutive across all leases, so a stage's place is right after the lease
        with the token before it."""
        while self._next_stage < len(self._stages):
            stage = self._stages[self._next_stage]
            if not every and stage.fencing_token != self.state.next_fencing_token():
                return
            self._next_stage += 1
            reservation = self.stored.lease(stage.attempt_id, LeasePurpose.RESERVATION)
            released_by_commit = (
                reservation is not None
                and stage.released_at_ns is not None
                and stage.released_at_ns == reservation.released_at_ns
            )
            row = attrs.evolve(stage, released_at_ns=None) if released_by_commit else stage
            self.state = attrs.evolve(self.state, leases=put(self.state.leases, row.id, row))

    def lease_request(self, event: StoredEvent, purpose: LeasePurpose) -> LeaseRequest:
        row = self.stored.lease(str(event.attempt_id), purpose)
        if row is None:
            message = f"the attempt has no stored {purpose.value} lease"
            raise _fail("event_unexplained", event, message)
        return LeaseRequest(
            lease_id=row.id, owner_token=row.owner_token, expires_at_ns=row.expires_at_ns
        )

    def check(self, event: StoredEvent, result: object) -> None:
        if isinstance(result, Refusal):
            raise _fail("event_refused", event, f"the model refuses it: {_said(result)}")

    def lost_authority(self, attempt: AttemptRow, at_ns: int) -> str | None:
        """The recovery cause of ``attempt`` at ``at_ns`` (None while its owner is live)."""
        return cause_at(self.state, attempt, rules.effective_now(at_ns, attempt.updated_at_ns))


_STAGING = LeasePurpose.STAGING


def _said(refusal: Refusal) -> str:
    return f"{refusal.code}: {refusal.message}"


def _references(event: StoredEvent, pairs: Sequence[tuple[str, str]]) -> list[Reference]:
    """The stored ``(role, artifact id)`` pairs as the model takes them. A role no
    :class:`Reference` takes is refused as the model's operation would refuse it."""
    try:
        return [Reference(role, artifact_id) for role, artifact_id in pairs]
    except InvalidRecordError as error:
        message = f"the model refuses it: {error.code}: {error.message}"
        raise _fail("event_refused", event, message) from None


def _short(row: tuple[Any, ...]) -> str:
    sequence, kind, attempt_id, at_ns, payload = row
    return f"#{sequence} {kind} {attempt_id} at {at_ns} {payload.decode()[:200]}"


# --- the calls each event kind records ---------------------------------------------------


def _reserved(replay: Replay, event: StoredEvent) -> None:
    slot_id, index = event.payload.get("slot_id"), event.payload.get("retry_index")
    if type(slot_id) is not str or type(index) is not int or index < 0:
        raise _fail("event_unexplained", event, "its slot_id or retry_index is malformed")
    lease = replay.lease_request(event, LeasePurpose.RESERVATION)
    authorization: RetryAuthorization = (
        FirstAttempt() if index == 0 else Retry(next_index=index, max_index=index)
    )
    replay.state, result = reserve(replay.state, slot_id, authorization, lease, event.at_ns)
    replay.check(event, result)
    if isinstance(result, OwnedAttempt) and result.attempt_id != event.attempt_id:
        raise _fail("event_differs", event, f"the replay reserved {result.attempt_id}")
    roots = {
        (lease.lease_id, artifact) for artifact in replay.stored.rooted.get(lease.lease_id, [])
    }
    replay.state = attrs.evolve(
        replay.state, leased_artifacts=replay.state.leased_artifacts | roots
    )


def _target(event: StoredEvent) -> AttemptState:
    try:
        return AttemptState(str(event.payload.get("to")))
    except ValueError:
        raise _fail("event_unexplained", event, "its target state is unknown") from None


def _transition(replay: Replay, event: StoredEvent) -> None:
    attempt_id = str(event.attempt_id)
    target = _target(event)
    replay.state, result = advance(replay.state, replay.guard(attempt_id), target, event.at_ns)
    replay.check(event, result)


def _finalizing(replay: Replay, event: StoredEvent) -> None:
    attempt_id = str(event.attempt_id)
    claim = event.payload.get("claim")
    if claim == payloads.CLAIMED:
        lease = replay.lease_request(event, LeasePurpose.FINALIZATION)
    elif claim == payloads.SUPERSEDED:
        row = replay.state.attempts[attempt_id]
        owner = replay.state.reservation_lease(attempt_id).owner_token
        lease = LeaseRequest(
            lease_id=f"audit:superseded:{event.sequence}",
            owner_token=owner,
            expires_at_ns=max(event.at_ns, row.updated_at_ns) + 1,
        )
    elif "claim" in event.payload:
        raise _fail("event_unexplained", event, f"its claim {claim!r:.40} is unknown")
    else:
        _entering_without_claim(replay, event)
        return
    guard = replay.guard(attempt_id)
    replay.state, result = begin_finalization(replay.state, guard, lease, event.at_ns)
    replay.check(event, result)


def _entering_without_claim(replay: Replay, event: StoredEvent) -> None:
    """An owner's ``advance`` to finalizing while its leases are live; otherwise recovery's
    own move, replayed with the interrupted failure it is committed with."""
    attempt_id = str(event.attempt_id)
    attempt = replay.state.attempts[attempt_id]
    if replay.lost_authority(attempt, event.at_ns) is None:
        guard = replay.guard(attempt_id)
        replay.state, result = advance(replay.state, guard, AttemptState.FINALIZING, event.at_ns)
        replay.check(event, result)
    else:
        replay.recovering[attempt_id] = event


def _finished(replay: Replay, event: StoredEvent) -> None:
    attempt_id = str(event.attempt_id)
    outcome = outcome_of(event)
    final = replay.stored.attempt_final.get(attempt_id)
    artifact = None if final is None else replay.stored.artifacts.get(final)
    reservation = replay.stored.lease(attempt_id, LeasePurpose.RESERVATION)
    if artifact is None or reservation is None or reservation.released_at_ns is None:
        message = "a finished attempt needs a registered final artifact and a released lease"
        raise _fail("event_unexplained", event, message)
    commit_ns = reservation.released_at_ns
    attempt = replay.state.attempts[attempt_id]
    cause = replay.lost_authority(attempt, commit_ns)
    if attempt_id not in replay.recovering and cause is None:
        references = _references(event, replay.stored.references.get(attempt_id, []))
        guard = replay.guard(attempt_id)
        replay.state, result = commit_finalization(
            replay.state, guard, outcome, artifact, references, event.at_ns, commit_ns
        )
        replay.check(event, result)
        return
    if cause is None:
        raise _fail("event_refused", event, "recovery finalized an owner that was still live")
    item = Recoverable(attempt_id=attempt_id, cause=cause)
    claims = interrupted_claims(outcome)
    if claims is not None:
        moved = replay.recovering.get(attempt_id)
        if moved is not None and (claims[1] is AttemptState.FINALIZING or moved.at_ns != commit_ns):
            _moved_by_an_earlier_pass(replay, moved, attempt)
            attempt = replay.state.attempts[attempt_id]
        if event.at_ns == commit_ns:  # built and committed by one pass
            replay.state, _ = interrupted_failure(replay.state, item, commit_ns, [])
        else:  # an earlier pass built it and died before its commit: imported
            _imported(replay, event, attempt, outcome, artifact, commit_ns)
        return
    if attempt_id in replay.recovering:
        raise _fail("event_refused", event, "recovery moved it to finalizing but imported")
    _imported(replay, event, attempt, outcome, artifact, commit_ns)


def _moved_by_an_earlier_pass(replay: Replay, moved: StoredEvent, attempt: AttemptRow) -> None:
    """Recovery's deferred move to finalizing, made by a pass that died before its failure
    committed (SPEC.md section 14.2: a pass may die anywhere; the next completes): the
    later pass's failure says the attempt was found finalizing, or is committed at another
    time than the move. The move is replayed at its own time, as that earlier pass made
    it: the model's interrupted failure at that instant, up to its move."""
    cause = replay.lost_authority(attempt, moved.at_ns)
    if cause is None:
        raise _fail("event_refused", moved, "recovery moved an owner that was still live")
    trail: list[ModelState] = []
    interrupted_failure(
        replay.state, Recoverable(attempt_id=attempt.id, cause=cause), moved.at_ns, trail
    )
    if not trail:
        raise _fail("event_refused", moved, "the model would not have moved it")
    replay.state = trail[0]


def _imported(
    replay: Replay,
    event: StoredEvent,
    attempt: AttemptRow,
    outcome: TerminalOutcome,
    artifact: Any,
    commit_ns: int,
) -> None:
    """Recovery imported the owner's published outcome: the model's outcome checks, then
    the shared terminal commit."""
    refusal = finishing_refusal(replay.state, attempt, outcome)
    if refusal is not None:
        raise _fail("event_refused", event, f"the model refuses the import: {_said(refusal)}")
    if not commit_ns >= event.at_ns >= attempt.updated_at_ns:
        message = f"finish {event.at_ns} and commit {commit_ns} are out of order"
        raise _fail("event_refused", event, message)
    references = _references(event, replay.stored.references.get(attempt.id, []))
    replay.state, _ = finish(
        replay.state, attempt, event.at_ns, commit_ns, outcome, artifact, references
    )


def _observed(replay: Replay, event: StoredEvent) -> None:
    payload = event.payload
    stored = replay.stored.observations.get(str(payload.get("observation_id")))
    artifact = replay.stored.artifacts.get(str(payload.get("artifact_id")))
    references = payload.get("references")
    if stored is None or artifact is None or type(references) is not list:
        message = "its observation, artifact or references are not stored"
        raise _fail("event_unexplained", event, message)
    pairs = [
        (item.get("role"), item.get("artifact_id")) for item in references if type(item) is dict
    ]
    if len(pairs) != len(references) or not all(
        type(role) is str and type(artifact_id) is str for role, artifact_id in pairs
    ):
        raise _fail("event_unexplained", event, "its references are malformed")
    guard = replay.guard(str(event.attempt_id))
    replay.state, result = register_observation(
        replay.state,
        guard,
        stored.observation,
        artifact,
        _references(event, [(str(role), str(artifact_id)) for role, artifact_id in pairs]),
        select=payload.get("selected") is True,
        now_ns=event.at_ns,
    )
    replay.check(event, result)


_HANDLERS: dict[str, Callable[[Replay, StoredEvent], None]] = {
    payloads.ATTEMPT_RESERVED: _reserved,
    payloads.ATTEMPT_TRANSITION: _transition,
    payloads.ATTEMPT_FINALIZING: _finalizing,
    payloads.ATTEMPT_FINISHED: _finished,
    payloads.OBSERVATION_REGISTERED: _observed,
}

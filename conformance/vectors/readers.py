"""Reading the plain-JSON forms the vector files share (``vectors/README.md``), as an
independent implementation would: leases, retry authorizations, terminal outcomes and
writer operations (replayed on any writer, each returned guard kept as its attempt's
latest). Used by ``test_vectors.py`` (events), ``test_outcomes.py`` and
``test_recovery.py`` (which adds the ``recover`` operation and its report); independent of
the generator's cases and encoders in ``tools/vectorgen``. A result is compared with the
file through its own ``to_json()`` (:func:`result_document`), whose encoding of each field
``conformance/values/test_receipts.py`` checks on its own.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runstore import Accepted
from runstore import ApplicabilityDecision
from runstore import ArtifactRegistration
from runstore import AttemptSlot
from runstore import AttemptState
from runstore import Censored
from runstore import ClaimDisposition
from runstore import Failed
from runstore import FirstAttempt
from runstore import LeaseRequest
from runstore import Next
from runstore import Observation
from runstore import ObservationReceipt
from runstore import ObservationSlot
from runstore import OwnedAttempt
from runstore import RecoveryReport
from runstore import Reference
from runstore import ResolvedRun
from runstore import Retry
from runstore import RetryAuthorization
from runstore import Superseded
from runstore import TerminalAttempt
from runstore import TerminalOutcome
from runstore.canonical import ns_from_json
from runstore.testing.lockstep import Writer

ROOT = Path(__file__).resolve().parents[2]


def generator(name: str) -> Any:
    """The generator module ``tools/vectorgen/<name>.py`` (``tools/`` is on the tests'
    path: pyproject's ``pythonpath``)."""
    return importlib.import_module(f"vectorgen.{name}")


def assert_current(name: str) -> None:
    """``vectors/<name>.json`` is what ``tools/vectorgen/<name>.py`` builds."""
    committed = (ROOT / "vectors" / f"{name}.json").read_text(encoding="utf-8")
    assert committed == generator(name).build(), f"vectors/{name}.json is stale: run tools/regen"


def read_vector_file(name: str) -> dict[str, Any]:
    """``vectors/<name>`` decoded, after checking it is ASCII (as every vector file is)."""
    data = (ROOT / "vectors" / name).read_bytes()
    data.decode("ascii")
    document = json.loads(data)
    assert isinstance(document, dict)
    return document


def lease_of(document: dict[str, Any]) -> LeaseRequest:
    return LeaseRequest(
        lease_id=document["lease_id"],
        owner_token=document["owner_token"],
        expires_at_ns=ns_from_json(document["expires_at_ns"]),
    )


def authorization_of(document: dict[str, Any]) -> RetryAuthorization:
    if document["kind"] == "first_attempt":
        return FirstAttempt()
    if document["kind"] == "next":
        return Next(retry=document["retry"])
    assert document["kind"] == "retry"
    return Retry(next_index=document["next_index"], max_index=document["max_index"])


def outcome_of(document: dict[str, Any]) -> TerminalOutcome:
    state = document["state"]
    if state == "failed":
        return Failed(code=document["code"], details=document["details"])
    if state == "censored":
        return Censored(reason=document["reason"])
    if state == "superseded":
        return Superseded()
    assert state == "accepted"
    return Accepted()


def references_of(references: list[list[str]]) -> list[Reference]:
    """The ``[role, artifact_id]`` pairs of a vector file as the writer takes them."""
    return [Reference(role, artifact_id) for role, artifact_id in references]


def replay(writer: Writer, operation: dict[str, Any], guards: dict[str, OwnedAttempt]) -> object:
    """Apply one operation and return its result; a guarded one's ``attempt_id`` names the
    latest guard in ``guards``, and the guard a call returns (alone, in a disposition or in
    an observation receipt) becomes its attempt's latest."""
    result = _apply(writer, operation, guards)
    guard = result.attempt if isinstance(result, ClaimDisposition | ObservationReceipt) else result
    if isinstance(guard, OwnedAttempt):
        guards[guard.attempt_id] = guard
    return result


def replay_checked(
    writer: Writer,
    operation: dict[str, Any],
    guards: dict[str, OwnedAttempt],
    committed: Callable[[], Sequence[int]],
) -> object:
    """:func:`replay` one operation, checking its result against the file's and the
    sequences of the events it committed (``committed()``: every sequence so far)."""
    before = len(committed())
    result = replay(writer, operation, guards)
    assert result_document(result) == operation["result"], operation["name"]
    assert list(committed()[before:]) == operation["event_sequences"], operation["name"]
    return result


def _apply(writer: Writer, operation: dict[str, Any], guards: dict[str, OwnedAttempt]) -> object:
    name, a = operation["operation"], operation["arguments"]
    # The files call a registration's decision "candidate" (vectors/README.md).
    if name == "register_slots":
        return writer.register_slots(
            ApplicabilityDecision.from_json(a["candidate"]),
            ResolvedRun.from_json(a["run"]),
            AttemptSlot.from_json(a["attempt_slot"]),
            [ObservationSlot.from_json(slot) for slot in a["observation_slots"]],
        )
    if name == "register_one_shot":
        return writer.register_one_shot(
            ApplicabilityDecision.from_json(a["candidate"]),
            ResolvedRun.from_json(a["run"]),
            AttemptSlot.from_json(a["attempt_slot"]),
            ObservationSlot.from_json(a["observation_slot"]),
        )
    if name == "recover":
        reading = ns_from_json(a["clock"])  # the pass samples its clock exactly once
        return writer.recover(lambda: reading)
    now_ns = ns_from_json(a["now_ns"])
    if name == "reserve":
        authorization = authorization_of(a["authorization"])
        return writer.reserve(a["slot_id"], authorization, lease_of(a["lease"]), now_ns)
    guard = guards[a["attempt_id"]]
    if name == "advance":
        return writer.advance(guard, AttemptState(a["phase"]), now_ns)
    if name == "begin_finalization":
        return writer.begin_finalization(guard, lease_of(a["lease"]), now_ns)
    if name == "register_observation":
        return writer.register_observation(
            guard,
            Observation.from_json(a["observation"]),
            ArtifactRegistration.from_json(a["artifact"]),
            references_of(a["references"]),
            select=a["select"],
            now_ns=now_ns,
        )
    assert name == "commit_finalization"
    return writer.commit_finalization(
        guard,
        outcome_of(a["outcome"]),
        ArtifactRegistration.from_json(a["artifact"]),
        references_of(a["references"]),
        ns_from_json(a["finished_at_ns"]),
        now_ns,
    )


RECEIPTS = (OwnedAttempt, ClaimDisposition, ObservationReceipt, TerminalAttempt, RecoveryReport)
"""What a writer call or a recovery pass returns, besides a registration's slot id."""


def result_document(result: object) -> dict[str, Any]:
    """The JSON a file pins for ``result``: ``{slot_id}`` for a registration, the receipt's
    own ``to_json()``, and a recovery report's with its rejections as ``[path, code]``
    pairs (their messages are not pinned)."""
    if isinstance(result, str):
        return {"slot_id": result}
    assert isinstance(result, RECEIPTS), type(result).__name__
    document: dict[str, Any] = result.to_json()
    if isinstance(result, RecoveryReport):
        document["rejected_artifacts"] = [
            [r["path"], r["code"]] for r in document["rejected_artifacts"]
        ]
    return document

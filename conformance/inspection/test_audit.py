"""The audit (SPEC.md section 16.2): a store the writer built replays through the model to
the same projection, and a row edited outside the writer is caught at the first event
whose replay it contradicts.

The stores come from :mod:`corrupt_world` (a campaign with a retried failure, a stream
after its warm-up, and attempts left open under a claim and a reservation); edits drop
and re-create the triggers around them, as someone editing the file by hand would.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from runstore import RunStore
from runstore.audit import AuditReport
from runstore.audit import Divergence
from runstore.audit import audit
from runstore.audit.replay import DIVERGENCE_CODES
from runstore.inspection.snapshot import Snapshot
from runstore.records import ApplicabilityDecision
from runstore.store.recovery import recover_tx

from conformance.closed_store import rows
from conformance.inspection.corrupt_world import edited

SECOND = 10**9


def audited(root: Path) -> AuditReport:
    with Snapshot.take(root) as snapshot:
        return audit(snapshot)


def diverges(root: Path, code: str) -> Divergence:
    report = audited(root)
    assert report.divergence is not None, "the audit found nothing"
    assert report.divergence.code == code, report.divergence
    assert report.divergence.code in DIVERGENCE_CODES
    return report.divergence


def test_a_store_the_writer_built_replays_to_the_same_projection(pristine: Path) -> None:
    report = audited(pristine)
    assert report.ok, report.divergence
    (events,) = rows(pristine, "SELECT count(*) FROM events")[0]
    (attempts,) = rows(pristine, "SELECT count(*) FROM attempts")[0]
    assert (report.events, report.attempts) == (events, attempts)
    assert events > 50
    document = report.to_json()
    assert document["ok"] is True and document["divergence"] is None
    json.dumps(document)


def test_a_store_after_recovery_replays_too(copy: Path) -> None:
    # Both open attempts' leases expire; recovery imports nothing for the claimed one
    # (no outcome) and commits interrupted failures, with their own failure objects.
    with RunStore.open(str(copy)) as store:
        report = store.recover(lambda: 1_700_000_000 * SECOND + 2 * 10**6 * SECOND)
    assert len(report.terminals) == 2
    assert audited(copy).ok


@pytest.mark.parametrize(
    ("step", "calls"),
    [("failure_document", 0), ("commit_failure", 0), ("commit_failure", 1)],
    ids=["before-its-failure", "before-its-commit", "second-attempt-before-its-commit"],
)
def test_a_recovery_pass_killed_between_its_steps_replays_too(
    copy: Path, monkeypatch: pytest.MonkeyPatch, step: str, calls: int
) -> None:
    """A pass dies between two of its transactions for an attempt (the kill soak found
    this with SIGKILL): after its move to finalizing and before it built its failure, or
    after it published its failure object and before the commit (for the attempt it moved,
    or for the claimed one it did not need to move). A later pass completes it: its own
    ``Failed(interrupted_attempt)`` (the attempt found finalizing), or the earlier pass's
    object imported. Both passes did what SPEC 14 says, so the log replays: the earlier
    pass's move at its own time, the later pass's commit at its."""
    later = 1_700_000_000 * SECOND + 2 * 10**6 * SECOND
    original = getattr(recover_tx, step)
    made: list[object] = []

    def killed(*arguments: object, **keywords: object) -> object:
        if len(made) == calls:
            raise KeyboardInterrupt  # the pass dies here
        made.append(step)
        return original(*arguments, **keywords)

    with RunStore.open(str(copy)) as store:
        monkeypatch.setattr(recover_tx, step, killed)
        with pytest.raises(KeyboardInterrupt):
            store.recover(lambda: later)
        monkeypatch.undo()
        report = store.recover(lambda: later + 3 * SECOND)
    assert len(report.terminals) == 2 - calls
    (finished,) = rows(
        copy, "SELECT count(*) FROM events WHERE kind = 'attempt_finished' AND at_ns >= ?", (later,)
    )[0]
    assert finished == 2
    divergence = audited(copy).divergence
    assert divergence is None, divergence


def test_an_edited_failure_code_is_caught_at_the_attempts_last_event(copy: Path) -> None:
    ((attempt_id,),) = rows(copy, "SELECT id FROM attempts WHERE failure_code = 'worker_failed'")
    with edited(copy) as connection:
        connection.execute("UPDATE attempts SET failure_code = 'oom' WHERE id = ?", (attempt_id,))
    divergence = diverges(copy, "attempt_differs")
    assert divergence.attempt_id == attempt_id and "'oom'" in divergence.message
    # Reported at the stored sequence of that attempt's last event (not a renumbered one).
    ((last,),) = rows(copy, "SELECT max(sequence) FROM events WHERE attempt_id = ?", (attempt_id,))
    assert divergence.sequence == last


def test_a_second_acceptance_written_by_hand_is_refused_by_the_model(copy: Path) -> None:
    # The failed first attempt of the retried slot is made accepted in its event: it
    # entered finalizing without the claim, so the replayed commit is refused.
    ((sequence,),) = rows(
        copy,
        "SELECT e.sequence FROM attempts a JOIN events e ON e.attempt_id = a.id "
        "WHERE a.failure_code = 'worker_failed' AND e.kind = 'attempt_finished'",
    )
    with edited(copy) as connection:
        connection.execute(
            "UPDATE events SET payload_json = json_object('from', 'finalizing', "
            "'revision', json_extract(payload_json, '$.revision'), 'to', 'accepted') "
            "WHERE sequence = ?",
            (sequence,),
        )
    divergence = diverges(copy, "event_refused")
    assert "claim_required" in divergence.message and divergence.sequence == sequence


def test_a_deleted_event_leaves_a_gap_the_replay_reports(copy: Path) -> None:
    ((sequence,),) = rows(
        copy, "SELECT min(sequence) FROM events WHERE kind = 'observation_registered'"
    )
    with edited(copy) as connection:
        connection.execute("DELETE FROM events WHERE sequence = ?", (sequence,))
    divergence = diverges(copy, "event_differs")
    assert f"{sequence} is missing" in divergence.message and divergence.sequence == sequence


def test_a_reference_role_no_writer_takes_is_refused_as_the_model_refuses_it(copy: Path) -> None:
    """A ``final`` role written into an observation's event by hand: no ``Reference`` can
    hold it, and the replay reports the refusal the model's own check gives."""
    ((sequence,),) = rows(
        copy, "SELECT min(sequence) FROM events WHERE kind = 'observation_registered'"
    )
    with edited(copy) as connection:
        connection.execute(
            "UPDATE events SET payload_json = json_set(payload_json, '$.references', "
            "json_array(json_object('artifact_id', json_extract(payload_json, '$.artifact_id'), "
            "'role', 'final'))) WHERE sequence = ?",
            (sequence,),
        )
    divergence = diverges(copy, "event_refused")
    assert divergence.sequence == sequence
    assert divergence.message == (
        "the model refuses it: invalid_record: reference roles must be nonempty and not 'final'"
    )


def test_a_lease_shortened_before_an_event_makes_that_event_refused(copy: Path) -> None:
    ((attempt_id, reserved_at),) = rows(
        copy,
        "SELECT id, started_at_ns FROM attempts WHERE state = 'accepted' "
        "ORDER BY started_at_ns LIMIT 1",
    )
    with edited(copy) as connection:
        connection.execute(
            "UPDATE leases SET expires_at_ns = ? WHERE attempt_id = ? AND purpose = 'reservation'",
            (int(str(reserved_at)) + 1, attempt_id),
        )
    assert "lease_expired" in diverges(copy, "event_refused").message


def test_an_edited_selection_time_is_caught(copy: Path) -> None:
    ((slot_id,),) = rows(
        copy,
        "SELECT slot_id FROM selected_observations s JOIN observation_slots o ON o.id = s.slot_id "
        "WHERE o.checkpoint_index IS NULL LIMIT 1",
    )
    with edited(copy) as connection:
        connection.execute(
            "UPDATE selected_observations SET selected_at_ns = selected_at_ns + 1 "
            "WHERE slot_id = ?",
            (slot_id,),
        )
    assert "table selections" in diverges(copy, "projection_differs").message


def test_a_decision_registered_without_a_slot_is_not_a_writer_history(copy: Path) -> None:
    with edited(copy) as connection:
        record = connection.execute(
            "SELECT record_json FROM applicability_decisions LIMIT 1"
        ).fetchone()[0]
        original = ApplicabilityDecision.from_json(json.loads(record))
        decision = attrs.evolve(original, problem_id="demo/elsewhere")
        connection.execute(
            "INSERT INTO applicability_decisions (id, candidate_id, problem_id, applicable, "
            "record_json) VALUES (?, ?, ?, ?, ?)",
            (
                decision.id,
                decision.candidate_id,
                decision.problem_id,
                int(decision.applicable),
                decision.to_bytes().decode(),
            ),
        )
    message = diverges(copy, "registration_refused").message
    assert "belongs to no registered attempt slot" in message


def test_an_unreadable_record_is_reported_not_skipped(copy: Path) -> None:
    with edited(copy) as connection:
        connection.execute(
            "UPDATE observations SET record_json = '{\"id\": 1}' WHERE rowid = "
            "(SELECT min(rowid) FROM observations)"
        )
    diverges(copy, "unreadable")

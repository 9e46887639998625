"""``runstore.inspection.validate``: a clean store has no findings, and each way of
damaging a copy of it yields its finding code (SPEC.md section 16).

One real store is built per module (:mod:`corrupt_world`); every test copies it, damages
the copy in one way, and requires the matching code. Full and ``quick`` checks are both
exercised where they differ. The reader's refusals and the argument checks are tested from
the text, and validation leaves the store byte for byte as it was.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from runstore import RunStore
from runstore.errors import RunStoreError
from runstore.inspection import validate
from runstore.inspection.snapshot import Snapshot
from runstore.inspection.validate import Finding
from runstore.inspection.validate import ValidationReport
from runstore.inspection.validate import validate_store

from conformance.closed_store import rows
from conformance.inspection.corrupt_world import DATABASE
from conformance.inspection.corrupt_world import artifact_dirs
from conformance.inspection.corrupt_world import edited
from conformance.inspection.corrupt_world import executed
from conformance.inspection.corrupt_world import payload_file
from conformance.inspection.corrupt_world import rewrite_consistently
from conformance.inspection.corrupt_world import rewrite_record


def codes(report: ValidationReport) -> set[str]:
    return {finding.code for finding in report.findings}


def findings_of(report: ValidationReport, code: str) -> list[Finding]:
    return [finding for finding in report.findings if finding.code == code]


def files_of(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


# --- a clean store ---------------------------------------------------------------------------


@pytest.mark.parametrize("quick", [False, True])
def test_a_clean_store_has_no_findings_and_is_left_unchanged(copy: Path, quick: bool) -> None:
    before = files_of(copy)
    report = validate_store(str(copy), quick=quick)
    assert report.findings == (), report.findings
    assert report.ok and report.quick is quick and report.root == str(copy)
    assert files_of(copy) == before
    assert not (copy / f"{DATABASE}-shm").exists()
    attempts = rows(copy, "SELECT count(*) FROM attempts")[0][0]
    artifacts = rows(copy, "SELECT count(*) FROM artifacts")[0][0]
    assert report.checked["attempts"] == attempts >= 10
    assert report.checked["artifacts"] == artifacts == len(artifact_dirs(copy))
    assert report.checked["finalization_claims"] == 1
    document = json.loads(json.dumps(report.to_json()))
    assert document == {
        "checked": dict(sorted(report.checked.items())),
        "findings": [],
        "ok": True,
        "quick": quick,
        "root": str(copy),
    }


def test_a_new_empty_store_is_clean(tmp_path: Path) -> None:
    RunStore.open(str(tmp_path)).close()
    report = validate_store(str(tmp_path))
    assert report.ok and set(report.checked.values()) == {0}
    assert "artifacts" in report.checked and "events" in report.checked


def test_the_fixture_covers_the_shapes_validate_reasons_about(copy: Path) -> None:
    """The invariants are not vacuous: the copy holds a retried slot, a stream with its
    warm-up, a selection per observation slot, a live claim, an open reservation and an
    attempt recovery failed after it claimed its slot and left a stage."""
    states = dict(rows(copy, "SELECT state, count(*) FROM attempts GROUP BY state"))
    assert states["accepted"] >= 6 and states["failed"] == 2
    assert (states["finalizing"], states["reserved"]) == (1, 1)
    assert rows(copy, "SELECT max(retry_index) FROM attempts") == [(1,)]
    kinds = {kind for (kind,) in rows(copy, "SELECT DISTINCT execution_kind FROM attempt_slots")}
    assert kinds == {"one_shot", "stream"}
    assert rows(copy, "SELECT count(*) FROM attempt_slots WHERE role = 'warmup'")[0][0] >= 1
    assert rows(copy, "SELECT count(*) FROM selected_observations")[0][0] >= 6
    assert rows(copy, "SELECT count(*) FROM attempts WHERE failure_code = 'interrupted_attempt'")
    assert rows(copy, "SELECT count(*) FROM leases WHERE purpose = 'staging'")[0][0] >= 2


# --- artifacts on disk ------------------------------------------------------------------------


def test_a_flipped_byte_is_corrupt_but_quick_does_not_read_content(copy: Path) -> None:
    file = payload_file(copy)
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0x01
    file.write_bytes(bytes(data))
    object_dir = "/".join(file.relative_to(copy).parts[:2])  # artifacts/<kind>-<digest>
    found = findings_of(validate_store(str(copy)), "artifact_corrupt")
    assert [f.subject for f in found] == [object_dir]
    assert "does not match its manifest digest" in found[0].message
    assert validate_store(str(copy), quick=True).ok


@pytest.mark.parametrize("quick", [False, True])
def test_a_deleted_file_is_corrupt(copy: Path, quick: bool) -> None:
    payload_file(copy).unlink()
    report = validate_store(str(copy), quick=quick)
    assert codes(report) == {"artifact_corrupt"}
    assert "is missing" in report.findings[0].message


@pytest.mark.parametrize("quick", [False, True])
def test_a_deleted_directory_is_missing(copy: Path, quick: bool) -> None:
    directory = artifact_dirs(copy)[0]
    for path in sorted(directory.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    directory.rmdir()
    report = validate_store(str(copy), quick=quick)
    assert [(f.code, f.subject) for f in report.findings] == [
        ("artifact_missing", f"artifacts/{directory.name}")
    ]


@pytest.mark.parametrize("quick", [False, True])
def test_an_extra_file_is_corrupt(copy: Path, quick: bool) -> None:
    (artifact_dirs(copy)[0] / "extra.txt").write_bytes(b"not listed")
    report = validate_store(str(copy), quick=quick)
    assert codes(report) == {"artifact_corrupt"}
    assert "'extra.txt' is an extra entry" in report.findings[0].message


@pytest.mark.parametrize("quick", [False, True])
def test_an_edited_manifest_is_corrupt(copy: Path, quick: bool) -> None:
    manifest = artifact_dirs(copy)[0] / "manifest.json"
    manifest.write_bytes(manifest.read_bytes() + b" ")
    report = validate_store(str(copy), quick=quick)
    assert codes(report) == {"artifact_corrupt"}
    assert "manifest" in report.findings[0].message


def test_a_consistent_rewrite_no_longer_matches_its_address(copy: Path) -> None:
    rewrite_consistently(payload_file(copy))
    assert codes(validate_store(str(copy))) == {
        "artifact_content_mismatch",
        "artifact_manifest_mismatch",
    }
    assert codes(validate_store(str(copy), quick=True)) == {"artifact_manifest_mismatch"}


def test_an_artifacts_link_is_reported_and_not_followed(copy: Path, tmp_path: Path) -> None:
    os.rename(copy / "artifacts", tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", copy / "artifacts")
    report = validate_store(str(copy))
    assert [(f.code, f.subject) for f in report.findings] == [("artifact_corrupt", "artifacts")]


# --- records -------------------------------------------------------------------------------


def test_an_edited_record_no_longer_has_its_id(copy: Path) -> None:
    with edited(copy) as connection:
        rewrite_record(
            connection,
            "attempt_slots",
            1,
            lambda doc: doc["specification"].update(x=1),  # type: ignore[union-attr]
        )
    (slot_id,) = rows(copy, "SELECT id FROM attempt_slots WHERE rowid = 1")[0]
    report = validate_store(str(copy))
    assert [(f.code, f.subject) for f in report.findings] == [("identity_mismatch", slot_id)]


def test_an_edited_column_disagrees_with_the_record(copy: Path) -> None:
    with edited(copy) as connection:
        connection.execute("UPDATE resolved_runs SET logical_spec_id = 'forged' WHERE rowid = 1")
    report = validate_store(str(copy))
    assert codes(report) == {"column_mismatch"}
    assert "logical_spec_id" in report.findings[0].message


def test_a_non_canonical_record_is_reported(copy: Path) -> None:
    with edited(copy) as connection:
        connection.execute(
            "UPDATE applicability_decisions SET record_json = ' ' || record_json WHERE rowid = 1"
        )
    assert codes(validate_store(str(copy))) == {"record_not_canonical"}


def test_an_attempt_record_that_is_not_its_row(copy: Path) -> None:
    with edited(copy) as connection:
        rewrite_record(connection, "attempts", 1, lambda doc: doc.update(revision=99))
    (attempt_id,) = rows(copy, "SELECT id FROM attempts WHERE rowid = 1")[0]
    report = validate_store(str(copy))
    assert [(f.code, f.subject) for f in report.findings] == [("column_mismatch", attempt_id)]


def test_an_attempt_record_with_a_boolean_for_an_integer(copy: Path) -> None:
    """``false`` is not ``0`` in canonical JSON, though Python's ``False == 0``."""
    (rowid, attempt_id) = rows(copy, "SELECT rowid, id FROM attempts WHERE revision = 0")[0]
    with edited(copy) as connection:
        rewrite_record(connection, "attempts", int(rowid), lambda doc: doc.update(revision=False))  # type: ignore[call-overload]
    report = validate_store(str(copy))
    assert [(f.code, f.subject) for f in report.findings] == [("column_mismatch", attempt_id)]
    assert "['revision']" in report.findings[0].message


# --- invariants ----------------------------------------------------------------------------


def test_two_accepted_attempts_of_one_slot(copy: Path) -> None:
    (index_sql,) = rows(
        copy, "SELECT sql FROM sqlite_schema WHERE name = 'one_accepted_attempt_per_slot'"
    )[0]
    with edited(copy) as connection:
        connection.execute("DROP INDEX one_accepted_attempt_per_slot")
        connection.execute(
            "UPDATE attempts SET state = 'accepted', failure_code = NULL "
            "WHERE state = 'failed' AND retry_index = 0"
        )
        # The same index, built without its uniqueness, then given its exact text back.
        connection.execute(str(index_sql).replace("UNIQUE ", ""))
        connection.execute("PRAGMA writable_schema = ON")
        connection.execute(
            "UPDATE sqlite_schema SET sql = ? WHERE name = 'one_accepted_attempt_per_slot'",
            (index_sql,),
        )
    (slot_id,) = rows(copy, "SELECT slot_id FROM attempts WHERE retry_index = 1")[0]
    report = validate_store(str(copy))
    assert [f.subject for f in findings_of(report, "slot_accepted_twice")] == [slot_id]
    assert "schema_mismatch" not in codes(report)


def test_a_deleted_transition_is_a_revision_gap(copy: Path) -> None:
    (attempt_id,) = rows(copy, "SELECT id FROM attempts WHERE state = 'accepted' LIMIT 1")[0]
    with edited(copy) as connection:
        connection.execute(
            "DELETE FROM attempt_transitions WHERE attempt_id = ? AND revision = 1", (attempt_id,)
        )
    report = validate_store(str(copy))
    assert [f.subject for f in findings_of(report, "revision_gap")] == [attempt_id]
    assert codes(report) == {"revision_gap", "event_orphan"}


def test_an_unreleased_lease_of_a_terminal_attempt(copy: Path) -> None:
    (attempt_id,) = rows(copy, "SELECT id FROM attempts WHERE state = 'accepted' LIMIT 1")[0]
    with edited(copy) as connection:
        connection.execute(
            "UPDATE leases SET released_at_ns = NULL WHERE attempt_id = ? "
            "AND purpose = 'reservation'",
            (attempt_id,),
        )
    report = validate_store(str(copy))
    assert [(f.code, f.subject) for f in report.findings] == [("lease_unreleased", attempt_id)]


def test_a_claim_for_a_terminal_attempt(copy: Path) -> None:
    (attempt_id, slot_id, lease_id) = rows(
        copy,
        "SELECT a.id, a.slot_id, l.id FROM attempts AS a JOIN leases AS l "
        "ON l.attempt_id = a.id AND l.purpose = 'finalization' WHERE a.state = 'accepted' "
        "LIMIT 1",
    )[0]
    with edited(copy) as connection:
        connection.execute(
            "INSERT INTO finalization_claims (slot_id, attempt_id, lease_id, claimed_at_ns, "
            "lease_purpose) VALUES (?, ?, ?, 1, 'finalization')",
            (slot_id, attempt_id, lease_id),
        )
    report = validate_store(str(copy))
    assert [(f.code, f.subject) for f in report.findings] == [("claim_inconsistent", attempt_id)]
    assert "accepted, not finalizing" in report.findings[0].message


def test_a_withdrawn_claim_is_missing(copy: Path) -> None:
    (attempt_id,) = rows(copy, "SELECT attempt_id FROM finalization_claims")[0]
    with edited(copy) as connection:
        connection.execute("DELETE FROM finalization_claims")
    report = validate_store(str(copy))
    assert [(f.code, f.subject) for f in report.findings] == [("claim_missing", attempt_id)]


def test_an_edited_event_payload(copy: Path) -> None:
    with edited(copy) as connection:
        connection.execute(
            "UPDATE events SET payload_json = replace(payload_json, '\"revision\":1', "
            "'\"revision\":7') WHERE kind = 'attempt_transition' AND sequence = "
            "(SELECT min(sequence) FROM events WHERE kind = 'attempt_transition')"
        )
    assert codes(validate_store(str(copy))) == {"event_mismatch"}


def test_a_cut_off_event_log(copy: Path) -> None:
    with edited(copy) as connection:
        connection.execute("DELETE FROM events WHERE sequence = (SELECT max(sequence) FROM events)")
    report = validate_store(str(copy))
    assert "event_gap" in codes(report)
    assert "foreign_key" in codes(report)  # its transition lost its event


def test_a_selection_of_another_slot(copy: Path) -> None:
    with edited(copy) as connection:
        connection.execute("PRAGMA foreign_keys = OFF")
        connection.execute(
            "UPDATE selected_observations SET observation_id = "
            "(SELECT observation_id FROM selected_observations ORDER BY rowid DESC LIMIT 1) "
            "WHERE rowid = 1"
        )
    report = validate_store(str(copy))
    assert "selection_invalid" in codes(report)
    assert "an observation of another slot" in findings_of(report, "selection_invalid")[0].message


ACCEPTED_ATTEMPT = "(SELECT id FROM attempts WHERE state = 'accepted' ORDER BY rowid LIMIT 1)"

DAMAGE = [
    pytest.param(
        ["UPDATE attempts SET retry_index = 5 WHERE retry_index = 1"], "retry_gap", id="retry"
    ),
    pytest.param(
        ["DELETE FROM attempt_observation_slots WHERE rowid = 1"], "slot_membership", id="member"
    ),
    pytest.param(
        [
            "UPDATE events SET payload_json = json_remove(payload_json, '$.claim') "
            "WHERE kind = 'attempt_finalizing' AND attempt_id = " + ACCEPTED_ATTEMPT
        ],
        "outcome_not_permitted",
        id="outcome",
    ),
    pytest.param(
        [
            "DELETE FROM selected_observations WHERE observation_id IN (SELECT id FROM "
            "observations WHERE attempt_id = " + ACCEPTED_ATTEMPT + ")"
        ],
        "acceptance_unsatisfied",
        id="acceptance",
    ),
    pytest.param(
        [
            "UPDATE leases SET purpose = 'finalization' WHERE purpose = 'reservation' "
            "AND attempt_id = " + ACCEPTED_ATTEMPT
        ],
        "reservation_lease",
        id="reservation",
    ),
    pytest.param(
        [
            "UPDATE leases SET staging_path = 'artifacts/.staging-elsewhere' "
            "WHERE rowid = (SELECT min(rowid) FROM leases WHERE purpose = 'staging')"
        ],
        "lease_inconsistent",
        id="stage",
    ),
    pytest.param(
        ["UPDATE leases SET fencing_token = 999 WHERE rowid = (SELECT max(rowid) FROM leases)"],
        "fencing_gap",
        id="fencing",
    ),
    pytest.param(
        [
            "PRAGMA ignore_check_constraints = ON",
            "UPDATE artifacts SET path = 'artifacts/elsewhere' WHERE rowid = 1",
        ],
        "artifact_address",
        id="address",
    ),
    pytest.param(
        [
            "UPDATE attempt_transitions SET from_state = 'executing' WHERE revision = 2 "
            "AND attempt_id = " + ACCEPTED_ATTEMPT
        ],
        "transition_mismatch",
        id="transition",
    ),
]


@pytest.mark.parametrize(("statements", "code"), DAMAGE)
def test_each_damage_yields_its_code(copy: Path, statements: list[str], code: str) -> None:
    with edited(copy) as connection:
        for statement in statements:
            connection.execute(statement)
    assert code in codes(validate_store(str(copy)))


def test_a_record_field_the_record_refuses_is_invalid(copy: Path) -> None:
    with edited(copy) as connection:
        rewrite_record(
            connection, "applicability_decisions", 1, lambda doc: doc.update(applicable=1)
        )
    report = validate_store(str(copy))
    assert codes(report) == {"record_invalid"}
    assert "applicable" in report.findings[0].message


# --- the database --------------------------------------------------------------------------


def test_dropped_triggers_are_a_schema_mismatch(copy: Path) -> None:
    with edited(copy, keep_triggers=False):
        pass
    report = validate_store(str(copy))
    assert codes(report) == {"schema_mismatch"}
    assert "missing trigger" in report.findings[0].message


def test_one_dropped_trigger_is_named(copy: Path) -> None:
    executed(copy, "DROP TRIGGER attempts_no_delete")
    report = validate_store(str(copy))
    assert [(f.code, f.subject) for f in report.findings] == [("schema_mismatch", "database")]
    assert "missing trigger attempts_no_delete" in report.findings[0].message


def test_a_foreign_schema_version_stops_the_checks(copy: Path) -> None:
    executed(copy, "PRAGMA user_version = 7")
    report = validate_store(str(copy))
    assert [f.code for f in report.findings] == ["schema_version"]
    assert report.checked == {}


def test_a_garbage_page_is_an_integrity_finding_or_a_typed_refusal(copy: Path) -> None:
    size = (copy / DATABASE).stat().st_size
    page = 4096
    with open(copy / DATABASE, "r+b") as handle:
        handle.seek((size // page // 2) * page)
        handle.write(b"\xa5" * page)
    try:
        report = validate_store(str(copy))
    except RunStoreError as error:  # a refusal must be typed
        assert error.code in {"inspection_unstable", "schema_mismatch"}
        return
    assert codes(report) & {"sqlite_integrity", "database_unreadable"}


def test_a_file_that_is_no_database_is_unreadable(copy: Path) -> None:
    (copy / DATABASE).write_bytes(b"this is not a database" * 100)
    report = validate_store(str(copy))
    assert [(f.code, f.subject) for f in report.findings] == [("database_unreadable", "database")]


def test_a_garbage_table_root_is_named_by_the_integrity_check(copy: Path) -> None:
    (root_page,) = rows(copy, "SELECT rootpage FROM sqlite_schema WHERE name = 'leases'")[0]
    with open(copy / DATABASE, "r+b") as handle:
        handle.seek((int(root_page) - 1) * 4096)  # type: ignore[call-overload]
        handle.write(b"\xa5" * 4096)
    report = validate_store(str(copy))
    integrity = findings_of(report, "sqlite_integrity")
    assert integrity and all(f.subject == "database" for f in integrity)
    assert any("leases" in f.message or "page" in f.message.lower() for f in integrity)


def test_the_raw_snapshot_hands_over_what_the_strict_one_refuses(copy: Path) -> None:
    with edited(copy, keep_triggers=False):
        pass
    with pytest.raises(RunStoreError) as info:
        Snapshot.take(copy)
    assert info.value.code == "schema_mismatch"
    with Snapshot.take(copy, strict=False) as snapshot:
        assert snapshot.connection.execute("PRAGMA query_only").fetchone() == (1,)
        assert snapshot.connection.execute("SELECT count(*) FROM attempts").fetchone()[0] > 0
    (copy / DATABASE).write_bytes(b"garbage" * 1000)
    with Snapshot.take(copy, strict=False) as snapshot, pytest.raises(sqlite3.DatabaseError):
        snapshot.connection.execute("PRAGMA user_version").fetchone()
    with pytest.raises(RunStoreError) as info:
        Snapshot.take(copy, strict=1)  # type: ignore[arg-type]
    assert info.value.code == "invalid_record"


def test_a_store_this_process_holds_is_refused(copy: Path) -> None:
    with RunStore.open(str(copy)), pytest.raises(RunStoreError) as info:
        validate_store(str(copy))
    assert info.value.code == "inspection_unsafe"


# --- the cap, refusals and arguments --------------------------------------------------------


def test_findings_of_one_code_are_capped_with_a_summary(
    copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directories = artifact_dirs(copy)
    os.rename(copy / "artifacts", copy / "moved")
    monkeypatch.setattr(validate, "FINDING_CAP", 2)
    report = validate_store(str(copy), quick=True)
    assert [f.code for f in report.findings] == [
        "artifact_missing",
        "artifact_missing",
        "findings_truncated",
    ]
    summary = report.findings[-1]
    assert summary.subject == "artifact_missing"
    assert f"{len(directories) - 2} more" in summary.message


def test_a_root_that_is_not_a_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RunStoreError) as info:
        validate_store(str(tmp_path))
    assert info.value.code == "unsafe_path"
    with pytest.raises(RunStoreError) as info:
        validate_store("relative/root")
    assert info.value.code == "unsafe_path"


def test_an_empty_database_is_not_a_store(tmp_path: Path) -> None:
    sqlite3.connect(tmp_path / DATABASE).close()
    (tmp_path / DATABASE).write_bytes(b"")
    with pytest.raises(RunStoreError) as info:
        validate_store(str(tmp_path))
    assert info.value.code == "unsafe_path"


@pytest.mark.parametrize(
    "arguments", [{"quick": 1}, {"quick": "yes"}, {"tries": 0}, {"tries": True}, {"tries": 1.5}]
)
def test_ill_typed_arguments_are_invalid_record(copy: Path, arguments: dict[str, object]) -> None:
    before = files_of(copy)
    with pytest.raises(RunStoreError) as info:
        validate_store(str(copy), **arguments)  # type: ignore[arg-type]
    assert info.value.code == "invalid_record"
    assert files_of(copy) == before


def test_every_code_is_lower_snake_case_and_listed_once() -> None:
    assert len(set(validate.FINDING_CODES)) == len(validate.FINDING_CODES)
    for code in validate.FINDING_CODES:
        assert code.replace("_", "").isalpha() and code == code.lower()
    finding = Finding(code="foreign_key", subject="leases:3", message="m")
    assert finding.to_json() == {"code": "foreign_key", "message": "m", "subject": "leases:3"}

"""Mutation check of schema v1 against its in-memory conformance tests.

The project promises that every constraint in ``impl/schema/v1.sql`` is pinned by a test in
``conformance/test_schema_*.py``: remove or weaken the constraint and a test fails. This
tool keeps that promise reproducible. :data:`MUTATIONS` is a table of named, surgical edits
of v1.sql (each replaces one ``old`` text, which must occur exactly once, by ``new``). For
every mutation the tool builds a throwaway tree in a temporary directory::

    <tmp>/impl/schema/v1.sql          the mutated schema
    <tmp>/conformance/schema_rows.py, conftest.py  copied (rows read ../impl/schema/v1.sql)
    <tmp>/conformance/test_schema_*.py  copied (all but test_schema_mutations.py)

and runs pytest on it in a subprocess, isolated from the repository's configuration
(``-c /dev/null``, ``--rootdir <tmp>``, ``-o addopts=``, no cache). A mutation is killed
when a test fails. An unmutated tree is run first and must pass. The real v1.sql is only
ever read.

Usage, from the repository root::

    python tools/schema_mutations.py               # all mutations, two at a time
    python tools/schema_mutations.py --list        # the table, nothing run
    python tools/schema_mutations.py --only NAME   # a subset (repeatable)

Output: one line per mutation, ``killed NAME -> first failing test`` or
``SURVIVED NAME -> ...`` (``STALE NAME -> why`` when its ``old`` text no longer occurs
exactly once or the mutant no longer builds, ``ERROR`` when pytest itself broke), then
``mutations=N killed=K survived=S stale=T seconds=X``. Exit status 1 if anything survived,
went stale or errored, 2 if the baseline run fails.

``conformance/test_schema_mutations.py`` checks the table itself (fast: no mutant runs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = Path("impl") / "schema" / "v1.sql"
CONFORMANCE = Path("conformance")
# The schema tests' row builders and their shared fixtures (conftest.py).
HELPERS = ("schema_rows.py", "conftest.py")
TEST_GLOB = "test_schema_*.py"
# This table's own checks match the glob but are not schema tests (and would fail on any
# mutant, killing it for the wrong reason).
NOT_SCHEMA_TESTS = frozenset({"test_schema_mutations.py"})
JOBS = 2
TIMEOUT_SECONDS = 600

# Constraint families. The first group is the list the schema promises to guard; the rest
# are further families the table also covers.
REQUIRED_FAMILIES = (
    "strict_tables",
    "schema_version",
    "applicability",
    "resolved_membership",
    "distinct_retries",
    "transaction_rollback",
    "transition_history",
    "event_linkage",
    "terminal_outcomes",
    "claim_ownership",
    "recovery_ordering",
    "immutable_selections",
    "retained_checkpoints",
    "artifact_kinds",
    "normalized_paths",
    "leases",
    "one_accepted_attempt_per_slot",
)
FAMILIES = (*REQUIRED_FAMILIES, "immutable_resolved", "artifact_digests", "json_objects", "ranges")


@dataclass(frozen=True)
class Mutation:
    name: str
    family: str
    old: str
    new: str

    def apply(self, schema: str) -> str:
        return schema.replace(self.old, self.new, 1)


def guard_trigger(table: str, operation: str, message: str) -> str:
    """The text of a one-statement guard trigger ``<table>_no_<operation>``."""
    return (
        f"CREATE TRIGGER {table}_no_{operation.lower()}\n"
        f"BEFORE {operation} ON {table}\n"
        "BEGIN\n"
        f"    SELECT RAISE(ABORT, '{table}: {message}');\n"
        "END;\n"
    )


def drop_guard(name: str, family: str, table: str, operation: str, message: str) -> Mutation:
    """Delete a whole one-statement guard trigger (BEFORE UPDATE or BEFORE DELETE)."""
    return Mutation(name, family, guard_trigger(table, operation, message), "")


def drop(name: str, family: str, old: str) -> Mutation:
    return Mutation(name, family, old, "")


# Path normal form, as written for artifacts.path (column ``path``) and leases.staging_path.
def _glob_clause(column: str, pattern: str) -> str:
    return f"            AND ('/' || {column} || '/') NOT GLOB '{pattern}'\n"


MUTATIONS: tuple[Mutation, ...] = (
    # --- strict tables --------------------------------------------------------------------
    Mutation(
        "strict_off_applicability_decisions",
        "strict_tables",
        "    UNIQUE (id, candidate_id, applicable)\n) STRICT;",
        "    UNIQUE (id, candidate_id, applicable)\n);",
    ),
    Mutation(
        "strict_off_artifacts",
        "strict_tables",
        "    UNIQUE (id, kind)\n) STRICT;",
        "    UNIQUE (id, kind)\n);",
    ),
    Mutation(
        "strict_off_leased_artifacts",
        "strict_tables",
        "    PRIMARY KEY (lease_id, artifact_id)\n) STRICT;",
        "    PRIMARY KEY (lease_id, artifact_id)\n);",
    ),
    # --- schema version -------------------------------------------------------------------
    Mutation(
        "user_version_two", "schema_version", "PRAGMA user_version = 1;", "PRAGMA user_version = 2;"
    ),
    drop("user_version_missing", "schema_version", "PRAGMA user_version = 1;\n"),
    # --- applicability --------------------------------------------------------------------
    drop(
        "run_applicable_check_removed",
        "applicability",
        " CONSTRAINT run_requires_applicable_decision\n        CHECK (applicable = 1)",
    ),
    Mutation(
        "run_decision_key_on_id_only",
        "applicability",
        "    FOREIGN KEY (decision_id, candidate_id, applicable)\n"
        "        REFERENCES applicability_decisions (id, candidate_id, applicable)\n",
        "    FOREIGN KEY (decision_id) REFERENCES applicability_decisions (id)\n",
    ),
    Mutation(
        "run_decision_key_removed",
        "applicability",
        "    record_json TEXT NOT NULL CONSTRAINT run_record_is_object\n"
        "        CHECK (json_valid(record_json) AND json_type(record_json) = 'object'),\n"
        "    FOREIGN KEY (decision_id, candidate_id, applicable)\n"
        "        REFERENCES applicability_decisions (id, candidate_id, applicable)\n",
        "    record_json TEXT NOT NULL CONSTRAINT run_record_is_object\n"
        "        CHECK (json_valid(record_json) AND json_type(record_json) = 'object')\n",
    ),
    drop(
        "decision_applicable_not_boolean",
        "applicability",
        " CONSTRAINT decision_applicable_is_boolean\n        CHECK (applicable IN (0, 1))",
    ),
    # --- resolved membership --------------------------------------------------------------
    Mutation(
        "membership_observation_slot_of_any_run",
        "resolved_membership",
        "FOREIGN KEY (observation_slot_id, run_id) REFERENCES observation_slots (id, run_id)",
        "FOREIGN KEY (observation_slot_id) REFERENCES observation_slots (id)",
    ),
    Mutation(
        "membership_attempt_slot_of_any_run",
        "resolved_membership",
        "FOREIGN KEY (attempt_slot_id, run_id) REFERENCES attempt_slots (id, run_id)",
        "FOREIGN KEY (attempt_slot_id) REFERENCES attempt_slots (id)",
    ),
    Mutation(
        "membership_several_producers",
        "resolved_membership",
        "    observation_slot_id TEXT NOT NULL PRIMARY KEY,\n    attempt_slot_id TEXT NOT NULL,",
        "    observation_slot_id TEXT NOT NULL,\n    attempt_slot_id TEXT NOT NULL,",
    ),
    Mutation(
        "warmup_may_own_observation_slot",
        "resolved_membership",
        "    SELECT RAISE(ABORT, 'attempt_observation_slots: a warmup slot owns no observation "
        "slot');",
        "    SELECT 1;",
    ),
    Mutation(
        "attempt_logical_slot_not_unique",
        "resolved_membership",
        "CONSTRAINT attempt_slot_record_is_object\n"
        "        CHECK (json_valid(record_json) AND json_type(record_json) = 'object'),\n"
        "    UNIQUE (run_id, logical_slot),\n",
        "CONSTRAINT attempt_slot_record_is_object\n"
        "        CHECK (json_valid(record_json) AND json_type(record_json) = 'object'),\n",
    ),
    Mutation(
        "observation_logical_slot_not_unique",
        "resolved_membership",
        "CONSTRAINT observation_slot_record_is_object\n"
        "        CHECK (json_valid(record_json) AND json_type(record_json) = 'object'),\n"
        "    UNIQUE (run_id, logical_slot),\n",
        "CONSTRAINT observation_slot_record_is_object\n"
        "        CHECK (json_valid(record_json) AND json_type(record_json) = 'object'),\n",
    ),
    Mutation(
        "result_slot_may_carry_checkpoint_index",
        "resolved_membership",
        "            (kind = 'result' AND checkpoint_index IS NULL)\n",
        "            (kind = 'result')\n",
    ),
    Mutation(
        "checkpoint_index_optional",
        "resolved_membership",
        "            OR (kind = 'checkpoint' AND checkpoint_index IS NOT NULL\n",
        "            OR (kind = 'checkpoint'\n",
    ),
    Mutation(
        "attempt_slot_role_open",
        "resolved_membership",
        "CHECK (role IN ('measurement', 'warmup'))",
        "CHECK (length(role) > 0)",
    ),
    Mutation(
        "execution_kind_open",
        "resolved_membership",
        "CHECK (execution_kind IN ('one_shot', 'fresh_observation', 'stream'))",
        "CHECK (length(execution_kind) > 0)",
    ),
    # Any other kind also breaks observation_slot_checkpoint_index, so widening the list
    # changes nothing observable; removing the CHECK changes which constraint refuses.
    drop(
        "observation_slot_kind_unchecked",
        "resolved_membership",
        " CONSTRAINT observation_slot_kind\n        CHECK (kind IN ('result', 'checkpoint'))",
    ),
    # --- immutable resolved records -------------------------------------------------------
    drop_guard(
        "decisions_updatable",
        "immutable_resolved",
        "applicability_decisions",
        "UPDATE",
        "rows are immutable",
    ),
    drop_guard(
        "decisions_deletable",
        "immutable_resolved",
        "applicability_decisions",
        "DELETE",
        "rows cannot be deleted",
    ),
    drop_guard(
        "runs_updatable", "immutable_resolved", "resolved_runs", "UPDATE", "rows are immutable"
    ),
    drop_guard(
        "runs_deletable", "immutable_resolved", "resolved_runs", "DELETE", "rows cannot be deleted"
    ),
    drop_guard(
        "attempt_slots_updatable",
        "immutable_resolved",
        "attempt_slots",
        "UPDATE",
        "rows are immutable",
    ),
    drop_guard(
        "observation_slots_deletable",
        "immutable_resolved",
        "observation_slots",
        "DELETE",
        "rows cannot be deleted",
    ),
    drop_guard(
        "membership_updatable",
        "immutable_resolved",
        "attempt_observation_slots",
        "UPDATE",
        "rows are immutable",
    ),
    drop_guard(
        "membership_deletable",
        "immutable_resolved",
        "attempt_observation_slots",
        "DELETE",
        "rows cannot be deleted",
    ),
    # --- distinct retries -----------------------------------------------------------------
    drop(
        "retry_index_not_unique_per_slot",
        "distinct_retries",
        "    UNIQUE (slot_id, retry_index),\n",
    ),
    Mutation(
        "retry_index_beyond_json_range",
        "distinct_retries",
        "CHECK (retry_index BETWEEN 0 AND 9007199254740991)",
        "CHECK (retry_index >= 0)",
    ),
    drop(
        "retry_index_mutable",
        "distinct_retries",
        "       OR NEW.retry_index IS NOT OLD.retry_index\n",
    ),
    # --- transaction rollback (the deferred projection key) -------------------------------
    Mutation(
        "projection_key_immediate",
        "transaction_rollback",
        "        REFERENCES attempt_transitions (attempt_id, revision, to_state, at_ns)\n"
        "        DEFERRABLE INITIALLY DEFERRED,\n",
        "        REFERENCES attempt_transitions (attempt_id, revision, to_state, at_ns),\n",
    ),
    drop(
        "projection_key_removed",
        "transaction_rollback",
        "    FOREIGN KEY (id, revision, state, updated_at_ns)\n"
        "        REFERENCES attempt_transitions (attempt_id, revision, to_state, at_ns)\n"
        "        DEFERRABLE INITIALLY DEFERRED,\n",
    ),
    Mutation(
        "projection_key_ignores_state_and_time",
        "transaction_rollback",
        "    FOREIGN KEY (id, revision, state, updated_at_ns)\n"
        "        REFERENCES attempt_transitions (attempt_id, revision, to_state, at_ns)\n",
        "    FOREIGN KEY (id, revision)\n"
        "        REFERENCES attempt_transitions (attempt_id, revision)\n",
    ),
    drop(
        "insert_need_not_be_reserved",
        "transaction_rollback",
        "    SELECT RAISE(ABORT, 'attempts: a new attempt must be reserved at revision 0')\n"
        "    WHERE NEW.state IS NOT 'reserved' OR NEW.revision IS NOT 0;\n",
    ),
    drop(
        "insert_update_time_free",
        "transaction_rollback",
        "    SELECT RAISE(ABORT, 'attempts: a new attempt must be updated at its start time')\n"
        "    WHERE NEW.updated_at_ns IS NOT NEW.started_at_ns;\n",
    ),
    # --- transition history ---------------------------------------------------------------
    drop(
        "history_revision_zero_free",
        "transition_history",
        "    SELECT RAISE(ABORT, 'attempt_transitions: revision 0 must be the reservation')\n"
        "    WHERE (NEW.revision = 0) != (NEW.from_state IS NULL AND NEW.to_state = 'reserved');\n",
    ),
    Mutation(
        "history_may_skip_revision",
        "transition_history",
        "    SELECT RAISE(ABORT, 'attempt_transitions: the previous revision is missing')\n"
        "    WHERE NEW.revision > 0 AND NOT EXISTS (",
        "    SELECT RAISE(ABORT, 'attempt_transitions: the previous revision is missing')\n"
        "    WHERE 0 AND NOT EXISTS (",
    ),
    Mutation(
        "history_from_state_free",
        "transition_history",
        "    SELECT RAISE(ABORT, 'attempt_transitions: from_state must be the previous to_state')\n"
        "    WHERE NEW.revision > 0 AND NEW.from_state IS NOT (",
        "    SELECT RAISE(ABORT, 'attempt_transitions: from_state must be the previous to_state')\n"
        "    WHERE 0 AND NEW.from_state IS NOT (",
    ),
    Mutation(
        "history_time_may_go_backwards",
        "transition_history",
        "    SELECT RAISE(ABORT, 'attempt_transitions: transition time cannot go backwards')\n"
        "    WHERE NEW.revision > 0 AND NEW.at_ns < (",
        "    SELECT RAISE(ABORT, 'attempt_transitions: transition time cannot go backwards')\n"
        "    WHERE 0 AND NEW.at_ns < (",
    ),
    Mutation(
        "history_extra_edge",
        "transition_history",
        "coalesce(NEW.from_state || '>' || NEW.to_state, '') NOT IN (\n"
        "        'reserved>materializing',",
        "coalesce(NEW.from_state || '>' || NEW.to_state, '') NOT IN (\n"
        "        'reserved>executing', 'reserved>materializing',",
    ),
    Mutation(
        "history_missing_edge",
        "transition_history",
        "        'validating>evaluating', 'executing>validating', 'evaluating>executing',\n"
        "        'reserved>finalizing', 'materializing>finalizing', 'starting>finalizing',\n"
        "        'preparing>finalizing', 'executing>finalizing', 'checkpointing>finalizing',\n"
        "        'validating>finalizing', 'evaluating>finalizing',\n"
        "        'finalizing>accepted', 'finalizing>censored', 'finalizing>superseded',\n"
        "        'finalizing>failed');\n"
        "    SELECT RAISE(ABORT, 'attempt_transitions: must extend",
        "        'validating>evaluating', 'executing>validating',\n"
        "        'reserved>finalizing', 'materializing>finalizing', 'starting>finalizing',\n"
        "        'preparing>finalizing', 'executing>finalizing', 'checkpointing>finalizing',\n"
        "        'validating>finalizing', 'evaluating>finalizing',\n"
        "        'finalizing>accepted', 'finalizing>censored', 'finalizing>superseded',\n"
        "        'finalizing>failed');\n"
        "    SELECT RAISE(ABORT, 'attempt_transitions: must extend",
    ),
    Mutation(
        "history_may_outrun_projection",
        "transition_history",
        "          NOT IN (NEW.revision - 1, NEW.revision);",
        "          NOT IN (NEW.revision - 2, NEW.revision - 1, NEW.revision);",
    ),
    Mutation(
        "history_revision_written_twice",
        "transition_history",
        "    PRIMARY KEY (attempt_id, revision),\n"
        "    UNIQUE (attempt_id, revision, to_state, at_ns),",
        "    UNIQUE (attempt_id, revision, to_state, at_ns),",
    ),
    drop_guard(
        "history_updatable",
        "transition_history",
        "attempt_transitions",
        "UPDATE",
        "rows are insert-only",
    ),
    drop_guard(
        "history_deletable",
        "transition_history",
        "attempt_transitions",
        "DELETE",
        "rows are insert-only",
    ),
    drop(
        "projection_revision_may_jump",
        "transition_history",
        "    SELECT RAISE(ABORT, 'attempts: revision must advance by exactly one')\n"
        "    WHERE NEW.revision IS NOT OLD.revision + 1;\n",
    ),
    drop(
        "projection_time_may_go_backwards",
        "transition_history",
        "    SELECT RAISE(ABORT, 'attempts: transition time cannot go backwards')\n"
        "    WHERE NEW.updated_at_ns < OLD.updated_at_ns;\n",
    ),
    Mutation(
        "projection_extra_edge",
        "transition_history",
        "    WHERE (OLD.state || '>' || NEW.state) NOT IN (\n        'reserved>materializing',",
        "    WHERE (OLD.state || '>' || NEW.state) NOT IN (\n"
        "        'reserved>accepted', 'reserved>materializing',",
    ),
    drop(
        "projection_started_at_mutable",
        "transition_history",
        "\n       OR NEW.started_at_ns IS NOT OLD.started_at_ns",
    ),
    drop_guard(
        "attempts_deletable", "transition_history", "attempts", "DELETE", "rows cannot be deleted"
    ),
    # --- event linkage --------------------------------------------------------------------
    Mutation(
        "transition_event_of_any_attempt_or_time",
        "event_linkage",
        "FOREIGN KEY (event_sequence, attempt_id, at_ns) REFERENCES events (sequence, attempt_id, "
        "at_ns)",
        "FOREIGN KEY (event_sequence) REFERENCES events (sequence)",
    ),
    Mutation(
        "event_shared_by_transitions",
        "event_linkage",
        "    event_sequence INTEGER NOT NULL UNIQUE,\n",
        "    event_sequence INTEGER NOT NULL,\n",
    ),
    drop(
        "event_kind_unchecked",
        "event_linkage",
        "    SELECT RAISE(ABORT, 'attempt_transitions: event kind does not match the transition')\n"
        "    WHERE (SELECT kind FROM events WHERE sequence = NEW.event_sequence) IS NOT (\n"
        "        CASE\n"
        "            WHEN NEW.revision = 0 THEN 'attempt_reserved'\n"
        "            WHEN NEW.to_state = 'finalizing' THEN 'attempt_finalizing'\n"
        "            WHEN NEW.to_state IN ('accepted', 'censored', 'superseded', 'failed')\n"
        "                THEN 'attempt_finished'\n"
        "            ELSE 'attempt_transition'\n"
        "        END);\n",
    ),
    Mutation(
        "event_kind_finalizing_as_transition",
        "event_linkage",
        "            WHEN NEW.to_state = 'finalizing' THEN 'attempt_finalizing'\n",
        "            WHEN NEW.to_state = 'finalizing' THEN 'attempt_transition'\n",
    ),
    drop_guard("events_updatable", "event_linkage", "events", "UPDATE", "rows are insert-only"),
    drop_guard("events_deletable", "event_linkage", "events", "DELETE", "rows are insert-only"),
    Mutation(
        "event_kind_open",
        "event_linkage",
        "'attempt_finalizing',\n                        'attempt_finished')),",
        "'attempt_finalizing',\n                        'attempt_finished', 'attempt_paused')),",
    ),
    Mutation(
        "event_of_unknown_attempt",
        "event_linkage",
        "    attempt_id TEXT REFERENCES attempts (id),\n    at_ns INTEGER NOT NULL",
        "    attempt_id TEXT,\n    at_ns INTEGER NOT NULL",
    ),
    # The three state enumerations cannot be reached through the triggers (every insert is
    # a reservation, every step a legal edge); like the revision ranges they are defence
    # in depth, so only a test beneath the triggers can pin them.
    Mutation(
        "attempt_state_open",
        "transition_history",
        "CHECK (state IN ('reserved',",
        "CHECK (state IN ('paused', 'reserved',",
    ),
    Mutation(
        "transition_to_state_open",
        "transition_history",
        "CHECK (to_state IN ('reserved',",
        "CHECK (to_state IN ('paused', 'reserved',",
    ),
    Mutation(
        "transition_from_state_open",
        "transition_history",
        "CHECK (from_state IN ('reserved',",
        "CHECK (from_state IN ('paused', 'reserved',",
    ),
    # --- terminal outcomes ----------------------------------------------------------------
    drop(
        "finish_time_not_tied_to_terminal",
        "terminal_outcomes",
        "    CONSTRAINT attempt_finish_iff_terminal\n"
        "        CHECK ((state IN ('accepted', 'censored', 'superseded', 'failed'))\n"
        "               = (finished_at_ns IS NOT NULL)),\n",
    ),
    drop(
        "final_artifact_not_tied_to_terminal",
        "terminal_outcomes",
        "    CONSTRAINT attempt_final_artifact_iff_terminal\n"
        "        CHECK ((state IN ('accepted', 'censored', 'superseded', 'failed'))\n"
        "               = (final_artifact_id IS NOT NULL AND final_artifact_kind IS NOT NULL)),\n",
    ),
    Mutation(
        "final_artifact_kind_may_be_missing",
        "terminal_outcomes",
        "= (final_artifact_id IS NOT NULL AND final_artifact_kind IS NOT NULL)),",
        "= (final_artifact_id IS NOT NULL)),",
    ),
    drop(
        "failure_code_not_tied_to_failed",
        "terminal_outcomes",
        "    CONSTRAINT attempt_failure_code_iff_failed\n"
        "        CHECK ((state = 'failed') = (failure_code IS NOT NULL)),\n",
    ),
    drop(
        "censor_reason_not_tied_to_censored",
        "terminal_outcomes",
        "    CONSTRAINT attempt_censor_reason_iff_censored\n"
        "        CHECK ((state = 'censored') = (censor_reason IS NOT NULL)),\n",
    ),
    Mutation(
        "failure_code_may_be_empty",
        "terminal_outcomes",
        "CHECK (length(failure_code) > 0)",
        "CHECK (length(failure_code) >= 0)",
    ),
    Mutation(
        "censor_reason_may_be_empty",
        "terminal_outcomes",
        "CHECK (length(censor_reason) > 0)",
        "CHECK (length(censor_reason) >= 0)",
    ),
    Mutation(
        "final_artifact_any_kind",
        "terminal_outcomes",
        "CHECK (final_artifact_kind = 'attempt')",
        "CHECK (length(final_artifact_kind) > 0)",
    ),
    Mutation(
        "final_artifact_need_not_exist",
        "terminal_outcomes",
        "        DEFERRABLE INITIALLY DEFERRED,\n"
        "    FOREIGN KEY (final_artifact_id, final_artifact_kind)"
        " REFERENCES artifacts (id, kind)\n",
        "        DEFERRABLE INITIALLY DEFERRED\n",
    ),
    Mutation(
        "finish_may_precede_start",
        "terminal_outcomes",
        "CHECK (finished_at_ns >= started_at_ns)",
        "CHECK (finished_at_ns >= 0)",
    ),
    drop(
        "terminal_attempt_mutable",
        "terminal_outcomes",
        "    SELECT RAISE(ABORT, 'attempts: a terminal attempt is immutable')\n"
        "    WHERE OLD.state IN ('accepted', 'censored', 'superseded', 'failed');\n",
    ),
    drop(
        "new_attempt_may_carry_outcome",
        "terminal_outcomes",
        "    SELECT RAISE(ABORT, 'attempts: a new attempt has no outcome')\n"
        "    WHERE NEW.finished_at_ns IS NOT NULL OR NEW.failure_code IS NOT NULL\n"
        "       OR NEW.censor_reason IS NOT NULL OR NEW.final_artifact_id IS NOT NULL\n"
        "       OR NEW.final_artifact_kind IS NOT NULL;\n",
    ),
    Mutation(
        "projection_missing_edge",
        "terminal_outcomes",
        "        'finalizing>accepted', 'finalizing>censored', 'finalizing>superseded',\n"
        "        'finalizing>failed');\n"
        "    SELECT RAISE(ABORT, 'attempts: acceptance requires",
        "        'finalizing>accepted', 'finalizing>censored',\n"
        "        'finalizing>failed');\n"
        "    SELECT RAISE(ABORT, 'attempts: acceptance requires",
    ),
    # --- claim ownership ------------------------------------------------------------------
    drop(
        "acceptance_without_claim",
        "claim_ownership",
        "    SELECT RAISE(ABORT, 'attempts: acceptance requires the slot finalization claim')\n"
        "    WHERE NEW.state = 'accepted' AND NOT EXISTS (\n"
        "        SELECT 1 FROM finalization_claims\n"
        "        WHERE slot_id = NEW.slot_id AND attempt_id = NEW.id);\n",
    ),
    Mutation(
        "acceptance_with_any_claim_of_the_slot",
        "claim_ownership",
        "        WHERE slot_id = NEW.slot_id AND attempt_id = NEW.id);",
        "        WHERE slot_id = NEW.slot_id);",
    ),
    Mutation(
        "claim_attempt_of_any_slot",
        "claim_ownership",
        "    FOREIGN KEY (attempt_id, slot_id) REFERENCES attempts (id, slot_id),\n",
        "    FOREIGN KEY (attempt_id) REFERENCES attempts (id),\n",
    ),
    Mutation(
        "claim_lease_of_any_attempt",
        "claim_ownership",
        "    FOREIGN KEY (lease_id, attempt_id, lease_purpose) REFERENCES leases (id, attempt_id, "
        "purpose)\n",
        "    FOREIGN KEY (lease_id) REFERENCES leases (id)\n",
    ),
    Mutation(
        "claim_lease_of_any_purpose",
        "claim_ownership",
        "CHECK (lease_purpose = 'finalization')",
        "CHECK (lease_purpose IN ('reservation', 'finalization', 'staging'))",
    ),
    Mutation(
        "claim_lease_reusable",
        "claim_ownership",
        "    lease_id TEXT NOT NULL UNIQUE,\n",
        "    lease_id TEXT NOT NULL,\n",
    ),
    drop(
        "claim_with_released_lease",
        "claim_ownership",
        "    SELECT RAISE(ABORT, 'finalization_claims: the lease is released')\n"
        "    WHERE EXISTS (\n"
        "        SELECT 1 FROM leases WHERE id = NEW.lease_id AND released_at_ns IS NOT NULL);\n",
    ),
    drop(
        "claim_after_acceptance",
        "claim_ownership",
        "    SELECT RAISE(ABORT, 'finalization_claims: the slot already has an accepted attempt')\n"
        "    WHERE EXISTS (\n"
        "        SELECT 1 FROM attempts WHERE slot_id = NEW.slot_id AND state = 'accepted');\n",
    ),
    drop_guard(
        "claim_owner_changeable",
        "claim_ownership",
        "finalization_claims",
        "UPDATE",
        "rows are immutable",
    ),
    # --- recovery ordering ----------------------------------------------------------------
    drop(
        "claim_delete_guard_removed",
        "recovery_ordering",
        "CREATE TRIGGER finalization_claims_delete_requires_terminal_attempt\n"
        "BEFORE DELETE ON finalization_claims\n"
        "WHEN EXISTS (\n"
        "    SELECT 1 FROM attempts\n"
        "    WHERE id = OLD.attempt_id\n"
        "      AND state NOT IN ('accepted', 'censored', 'superseded', 'failed'))\n"
        "BEGIN\n"
        "    SELECT RAISE(ABORT, 'finalization_claims: the claiming attempt is not terminal');\n"
        "END;\n",
    ),
    Mutation(
        "claim_released_while_finalizing",
        "recovery_ordering",
        "      AND state NOT IN ('accepted', 'censored', 'superseded', 'failed'))\nBEGIN",
        "      AND state NOT IN ('finalizing', 'accepted', 'censored', 'superseded', 'failed'))\n"
        "BEGIN",
    ),
    # --- immutable selections -------------------------------------------------------------
    drop_guard(
        "selection_updatable",
        "immutable_selections",
        "selected_observations",
        "UPDATE",
        "rows are insert-only",
    ),
    drop_guard(
        "selection_replaceable",
        "immutable_selections",
        "selected_observations",
        "DELETE",
        "rows are insert-only",
    ),
    Mutation(
        "selection_of_invalid_observation",
        "immutable_selections",
        "CONSTRAINT selection_requires_valid CHECK (valid = 1)",
        "CONSTRAINT selection_requires_valid CHECK (valid IN (0, 1))",
    ),
    Mutation(
        "selection_of_another_slot",
        "immutable_selections",
        "FOREIGN KEY (observation_id, slot_id, valid) REFERENCES observations (id, slot_id, valid)",
        "FOREIGN KEY (observation_id) REFERENCES observations (id)",
    ),
    Mutation(
        "selection_not_unique_per_slot",
        "immutable_selections",
        "    slot_id TEXT NOT NULL PRIMARY KEY,\n    observation_id TEXT NOT NULL,\n",
        "    slot_id TEXT NOT NULL,\n    observation_id TEXT NOT NULL,\n",
    ),
    # --- retained checkpoints -------------------------------------------------------------
    drop_guard(
        "observations_deletable",
        "retained_checkpoints",
        "observations",
        "DELETE",
        "rows cannot be deleted",
    ),
    drop_guard(
        "observations_updatable",
        "retained_checkpoints",
        "observations",
        "UPDATE",
        "rows are immutable",
    ),
    Mutation(
        "observation_of_unowned_slot",
        "retained_checkpoints",
        "    FOREIGN KEY (slot_id, attempt_slot_id)\n"
        "        REFERENCES attempt_observation_slots (observation_slot_id, attempt_slot_id),\n",
        "    FOREIGN KEY (slot_id) REFERENCES observation_slots (id),\n",
    ),
    Mutation(
        "observation_attempt_of_any_slot",
        "retained_checkpoints",
        "    FOREIGN KEY (attempt_id, attempt_slot_id) REFERENCES attempts (id, slot_id),\n",
        "    FOREIGN KEY (attempt_id) REFERENCES attempts (id),\n",
    ),
    Mutation(
        "observation_valid_not_boolean",
        "retained_checkpoints",
        "CONSTRAINT observation_valid_is_boolean CHECK (valid IN (0, 1))",
        "CONSTRAINT observation_valid_is_boolean CHECK (valid >= 0)",
    ),
    Mutation(
        "observation_completion_open",
        "retained_checkpoints",
        "CHECK (completion IN ('reached', 'not_reached'))",
        "CHECK (length(completion) > 0)",
    ),
    # --- artifact kinds -------------------------------------------------------------------
    Mutation(
        "artifact_kind_open",
        "artifact_kinds",
        "                        'environment', 'other')),",
        "                        'environment', 'other', 'log')),",
    ),
    Mutation(
        "artifact_kind_missing_other",
        "artifact_kinds",
        "                        'environment', 'other')),",
        "                        'environment')),",
    ),
    Mutation(
        "attempt_artifact_role_final",
        "artifact_kinds",
        "CHECK (length(role) > 0 AND role != 'final')",
        "CHECK (length(role) > 0)",
    ),
    Mutation(
        "attempt_artifact_role_empty",
        "artifact_kinds",
        "CHECK (length(role) > 0 AND role != 'final')",
        "CHECK (role != 'final')",
    ),
    Mutation(
        "observation_directory_any_kind",
        "artifact_kinds",
        "CHECK (artifact_kind = 'observation')",
        "CHECK (length(artifact_kind) > 0)",
    ),
    drop(
        "observation_artifact_kind_without_id",
        "artifact_kinds",
        "    CONSTRAINT observation_artifact_id_with_kind\n"
        "        CHECK ((artifact_id IS NULL) = (artifact_kind IS NULL)),\n",
    ),
    drop(
        "artifact_id_not_derived",
        "artifact_kinds",
        "    CONSTRAINT artifact_id_matches_content\n"
        "        CHECK (id = 'run-store-v1:' || kind || '-' || content_sha256),\n",
    ),
    drop(
        "artifact_path_not_derived",
        "artifact_kinds",
        "    CONSTRAINT artifact_path_matches_content\n"
        "        CHECK (path = 'artifacts/' || kind || '-' || content_sha256),\n",
    ),
    drop_guard(
        "artifacts_updatable", "artifact_kinds", "artifacts", "UPDATE", "rows are immutable"
    ),
    drop_guard(
        "artifacts_deletable", "artifact_kinds", "artifacts", "DELETE", "rows cannot be deleted"
    ),
    Mutation(
        "attempt_reference_to_missing_artifact",
        "artifact_kinds",
        "    role TEXT NOT NULL CONSTRAINT attempt_artifact_role\n"
        "        CHECK (length(role) > 0 AND role != 'final'),\n"
        "    artifact_id TEXT NOT NULL REFERENCES artifacts (id),\n",
        "    role TEXT NOT NULL CONSTRAINT attempt_artifact_role\n"
        "        CHECK (length(role) > 0 AND role != 'final'),\n"
        "    artifact_id TEXT NOT NULL,\n",
    ),
    Mutation(
        "observation_reference_to_missing_artifact",
        "artifact_kinds",
        "CONSTRAINT observation_artifact_role CHECK (length(role) > 0),\n"
        "    artifact_id TEXT NOT NULL REFERENCES artifacts (id),\n",
        "CONSTRAINT observation_artifact_role CHECK (length(role) > 0),\n"
        "    artifact_id TEXT NOT NULL,\n",
    ),
    Mutation(
        "leased_reference_to_missing_artifact",
        "artifact_kinds",
        "    lease_id TEXT NOT NULL REFERENCES leases (id),\n"
        "    artifact_id TEXT NOT NULL REFERENCES artifacts (id),\n",
        "    lease_id TEXT NOT NULL REFERENCES leases (id),\n    artifact_id TEXT NOT NULL,\n",
    ),
    # --- normalized paths -----------------------------------------------------------------
    drop(
        "artifact_path_empty_segment",
        "normalized_paths",
        "            ('/' || path || '/') NOT GLOB '*//*'\n            AND ",
    ),
    drop("artifact_path_dot_segment", "normalized_paths", _glob_clause("path", "*/./*")),
    drop("artifact_path_dotdot_segment", "normalized_paths", _glob_clause("path", "*/../*")),
    drop(
        "artifact_path_backslash",
        "normalized_paths",
        "            AND instr(path, char(92)) = 0\n",
    ),
    drop(
        "artifact_path_nul",
        "normalized_paths",
        "            AND instr(CAST(path AS BLOB), X'00') = 0\n",
    ),
    Mutation(
        "artifact_path_c1_controls",
        "normalized_paths",
        "            AND path NOT GLOB ('*[' || char(1) || '-' || char(31) || char(127) || '-'\n"
        "                               || char(159) || ']*')\n",
        "            AND path NOT GLOB ('*[' || char(1) || '-' || char(31) || char(127) || ']*')\n",
    ),
    drop(
        "staging_path_empty_segment",
        "normalized_paths",
        "            ('/' || staging_path || '/') NOT GLOB '*//*'\n            AND ",
    ),
    drop("staging_path_dot_segment", "normalized_paths", _glob_clause("staging_path", "*/./*")),
    drop("staging_path_dotdot_segment", "normalized_paths", _glob_clause("staging_path", "*/../*")),
    drop(
        "staging_path_backslash",
        "normalized_paths",
        "            AND instr(staging_path, char(92)) = 0\n",
    ),
    drop(
        "staging_path_nul",
        "normalized_paths",
        "            AND instr(CAST(staging_path AS BLOB), X'00') = 0\n",
    ),
    Mutation(
        "staging_path_controls",
        "normalized_paths",
        "            AND staging_path NOT GLOB ('*[' || char(1) || '-' || char(31)"
        " || char(127) || '-'\n"
        "                                       || char(159) || ']*')\n",
        "",
    ),
    drop(
        "staging_path_without_staging_purpose",
        "normalized_paths",
        "    CONSTRAINT lease_staging_path_iff_staging\n"
        "        CHECK ((purpose = 'staging') = (staging_path IS NOT NULL)),\n",
    ),
    # --- artifact digests -----------------------------------------------------------------
    Mutation(
        "content_digest_any_length",
        "artifact_digests",
        "CHECK (length(content_sha256) = 64 AND content_sha256 NOT GLOB '*[^0-9a-f]*')",
        "CHECK (content_sha256 NOT GLOB '*[^0-9a-f]*')",
    ),
    Mutation(
        "content_digest_uppercase",
        "artifact_digests",
        "CHECK (length(content_sha256) = 64 AND content_sha256 NOT GLOB '*[^0-9a-f]*')",
        "CHECK (length(content_sha256) = 64 AND content_sha256 NOT GLOB '*[^0-9a-fA-F]*')",
    ),
    Mutation(
        "manifest_digest_any_length",
        "artifact_digests",
        "CHECK (length(manifest_sha256) = 64 AND manifest_sha256 NOT GLOB '*[^0-9a-f]*')",
        "CHECK (manifest_sha256 NOT GLOB '*[^0-9a-f]*')",
    ),
    Mutation(
        "manifest_digest_any_characters",
        "artifact_digests",
        "CHECK (length(manifest_sha256) = 64 AND manifest_sha256 NOT GLOB '*[^0-9a-f]*')",
        "CHECK (length(manifest_sha256) = 64)",
    ),
    # --- leases ---------------------------------------------------------------------------
    drop(
        "lease_expiry_shrinkable",
        "leases",
        "    SELECT RAISE(ABORT, 'leases: expiry cannot be shortened')\n"
        "    WHERE NEW.expires_at_ns < OLD.expires_at_ns;\n",
    ),
    Mutation(
        "lease_expiry_at_acquisition",
        "leases",
        "CHECK (expires_at_ns > acquired_at_ns)",
        "CHECK (expires_at_ns >= acquired_at_ns)",
    ),
    Mutation(
        "lease_release_before_acquisition",
        "leases",
        "CHECK (released_at_ns >= acquired_at_ns)",
        "CHECK (released_at_ns >= 0)",
    ),
    drop(
        "lease_release_revocable",
        "leases",
        "    SELECT RAISE(ABORT, 'leases: a released lease is final')\n"
        "    WHERE OLD.released_at_ns IS NOT NULL\n"
        "      AND (NEW.released_at_ns IS NOT OLD.released_at_ns\n"
        "           OR NEW.expires_at_ns IS NOT OLD.expires_at_ns);\n",
    ),
    Mutation(
        "lease_released_expiry_extendable",
        "leases",
        "      AND (NEW.released_at_ns IS NOT OLD.released_at_ns\n"
        "           OR NEW.expires_at_ns IS NOT OLD.expires_at_ns);\n",
        "      AND (NEW.released_at_ns IS NOT OLD.released_at_ns);\n",
    ),
    Mutation(
        "lease_owner_mutable",
        "leases",
        "       OR NEW.owner_token IS NOT OLD.owner_token"
        " OR NEW.attempt_id IS NOT OLD.attempt_id\n",
        "       OR NEW.attempt_id IS NOT OLD.attempt_id\n",
    ),
    Mutation(
        "lease_fencing_token_mutable",
        "leases",
        "    WHERE NEW.id IS NOT OLD.id OR NEW.fencing_token IS NOT OLD.fencing_token\n",
        "    WHERE NEW.id IS NOT OLD.id\n",
    ),
    Mutation(
        "lease_purpose_mutable",
        "leases",
        "       OR NEW.purpose IS NOT OLD.purpose OR NEW.acquired_at_ns IS NOT OLD.acquired_at_ns;",
        "       OR NEW.acquired_at_ns IS NOT OLD.acquired_at_ns;",
    ),
    Mutation(
        "lease_fencing_token_reusable",
        "leases",
        "    fencing_token INTEGER NOT NULL UNIQUE CONSTRAINT lease_fencing_token_range\n",
        "    fencing_token INTEGER NOT NULL CONSTRAINT lease_fencing_token_range\n",
    ),
    Mutation(
        "lease_owner_token_empty",
        "leases",
        "CHECK (length(owner_token) > 0)",
        "CHECK (owner_token IS NOT NULL)",
    ),
    Mutation(
        "lease_purpose_open",
        "leases",
        "CHECK (purpose IN ('reservation', 'finalization', 'staging'))",
        "CHECK (length(purpose) > 0)",
    ),
    drop_guard("leases_deletable", "leases", "leases", "DELETE", "rows cannot be deleted"),
    # --- one accepted attempt per slot ----------------------------------------------------
    drop(
        "one_accepted_index_dropped",
        "one_accepted_attempt_per_slot",
        "CREATE UNIQUE INDEX one_accepted_attempt_per_slot\n"
        "    ON attempts (slot_id) WHERE state = 'accepted';\n",
    ),
    Mutation(
        "one_accepted_index_not_unique",
        "one_accepted_attempt_per_slot",
        "CREATE UNIQUE INDEX one_accepted_attempt_per_slot\n",
        "CREATE INDEX one_accepted_attempt_per_slot\n",
    ),
    Mutation(
        "one_accepted_index_wrong_state",
        "one_accepted_attempt_per_slot",
        "    ON attempts (slot_id) WHERE state = 'accepted';\n",
        "    ON attempts (slot_id) WHERE state = 'finalizing';\n",
    ),
    # --- JSON objects ---------------------------------------------------------------------
    Mutation(
        "decision_record_any_json",
        "json_objects",
        "CONSTRAINT decision_record_is_object\n"
        "        CHECK (json_valid(record_json) AND json_type(record_json) = 'object'),",
        "CONSTRAINT decision_record_is_object\n        CHECK (json_valid(record_json)),",
    ),
    Mutation(
        "event_payload_any_text",
        "json_objects",
        "CHECK (json_valid(payload_json) AND json_type(payload_json) = 'object'),",
        "CHECK (length(payload_json) >= 0),",
    ),
    # --- ranges ---------------------------------------------------------------------------
    Mutation(
        "verified_at_negative",
        "ranges",
        "CHECK (verified_at_ns >= 0)",
        "CHECK (verified_at_ns >= -1)",
    ),
    Mutation(
        "revision_beyond_json_range",
        "ranges",
        "CONSTRAINT attempt_revision_range\n"
        "        CHECK (revision BETWEEN 0 AND 9007199254740991),",
        "CONSTRAINT attempt_revision_range\n        CHECK (revision >= 0),",
    ),
    Mutation(
        "checkpoint_index_beyond_json_range",
        "ranges",
        "                AND checkpoint_index BETWEEN 0 AND 9007199254740991)\n",
        "                AND checkpoint_index >= 0)\n",
    ),
    Mutation(
        "started_at_negative",
        "ranges",
        "CHECK (started_at_ns >= 0)",
        "CHECK (started_at_ns >= -1)",
    ),
    Mutation(
        "observation_artifact_role_empty",
        "artifact_kinds",
        "CONSTRAINT observation_artifact_role CHECK (length(role) > 0)",
        "CONSTRAINT observation_artifact_role CHECK (role IS NOT NULL)",
    ),
    Mutation(
        "claim_time_negative",
        "ranges",
        "CHECK (claimed_at_ns >= 0)",
        "CHECK (claimed_at_ns >= -1)",
    ),
    Mutation(
        "updated_before_start",
        "ranges",
        "CHECK (updated_at_ns >= started_at_ns)",
        "CHECK (updated_at_ns >= 0)",
    ),
)


# --- running -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    status: str  # "killed", "SURVIVED", "STALE" or "ERROR"
    detail: str


def schema_tests(root: Path = ROOT) -> list[Path]:
    """The schema test modules a mutant is judged by (sorted, as pytest orders them)."""
    return sorted(
        path for path in (root / CONFORMANCE).glob(TEST_GLOB) if path.name not in NOT_SCHEMA_TESTS
    )


def builds(schema: str) -> str | None:
    """None if ``schema`` builds cleanly on an empty in-memory database (every foreign key
    naming a real parent key), else the error."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        conn.executescript(schema)
        # Reports a foreign key whose parent columns are not a key ("foreign key mismatch"),
        # which would otherwise only surface, and kill, on the first insert.
        conn.execute("PRAGMA foreign_key_check").fetchall()
    except sqlite3.Error as error:
        return f"{type(error).__name__}: {error}"
    finally:
        conn.close()
    return None


def stale_reason(mutation: Mutation, schema: str) -> str | None:
    """Why ``mutation`` no longer applies to ``schema``, or None if it does."""
    occurrences = schema.count(mutation.old)
    if occurrences != 1:
        return f"old text occurs {occurrences} times in v1.sql (expected exactly once)"
    if mutation.old == mutation.new:
        return "new text equals old text"
    error = builds(mutation.apply(schema))
    if error is not None:
        return f"mutant schema does not build: {error}"
    return None


def first_failure(output: str) -> str | None:
    """The first FAILED/ERROR test id in pytest's short summary (``-rfE``)."""
    for line in output.splitlines():
        for prefix in ("FAILED ", "ERROR "):
            if line.startswith(prefix):
                test = line[len(prefix) :].split(" - ", 1)[0].strip()
                return test.removeprefix(f"{CONFORMANCE.as_posix()}/")
    return None


def run_tree(schema: str, tests: Sequence[Path], helpers: Sequence[Path]) -> tuple[int, str]:
    """Build a throwaway tree holding ``schema`` and copies of the tests; run pytest on it.
    Returns pytest's exit status and its combined output."""
    with tempfile.TemporaryDirectory(prefix="schema-mutant-") as tmp:
        root = Path(tmp)
        (root / SCHEMA).parent.mkdir(parents=True)
        (root / SCHEMA).write_text(schema, encoding="utf-8")
        conformance = root / CONFORMANCE
        conformance.mkdir()
        for source in (*helpers, *tests):
            shutil.copyfile(source, conformance / source.name)
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-x",
            "-p",
            "no:cacheprovider",
            "-c",
            os.devnull,
            "--rootdir",
            str(root),
            "-o",
            "addopts=",
            "-rfE",
            *(str(conformance / test.name) for test in tests),
        ]
        env = {key: value for key, value in os.environ.items() if key != "PYTEST_ADDOPTS"}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        try:
            done = subprocess.run(
                command,
                cwd=root,
                env=env,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return -1, f"timed out after {TIMEOUT_SECONDS} s"
        return done.returncode, done.stdout + done.stderr


def judge(returncode: int, output: str) -> Outcome:
    failed = first_failure(output)
    if returncode == 0:
        return Outcome("SURVIVED", "every schema test passed")
    # 1: tests failed; 2: interrupted (e.g. a collection error) after reporting a failure.
    if returncode in (1, 2) and failed is not None:
        return Outcome("killed", failed)
    tail = " | ".join(output.strip().splitlines()[-3:])
    return Outcome("ERROR", f"pytest exit status {returncode}: {tail}")


def run_mutant(job: tuple[str, Sequence[Path], Sequence[Path]]) -> Outcome:
    schema, tests, helpers = job
    return judge(*run_tree(schema, tests, helpers))


def select(names: Sequence[str]) -> list[Mutation]:
    if not names:
        return list(MUTATIONS)
    known = {mutation.name: mutation for mutation in MUTATIONS}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(f"unknown mutation(s): {', '.join(unknown)}")
    return [known[name] for name in names]


def say(line: str) -> None:
    print(line, flush=True)


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = say) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--only", action="append", default=[], metavar="NAME")
    parser.add_argument("--list", action="store_true", help="print the table and exit")
    parser.add_argument("--jobs", type=int, default=JOBS)
    args = parser.parse_args(argv)
    mutations = select(args.only)
    if args.list:
        for mutation in mutations:
            out(f"{mutation.family:32} {mutation.name}")
        return 0

    started = time.monotonic()
    schema = (ROOT / SCHEMA).read_text(encoding="utf-8")
    tests = schema_tests()
    helpers = tuple(ROOT / CONFORMANCE / name for name in HELPERS)

    code, output = run_tree(schema, tests, helpers)
    if code != 0:
        failed = first_failure(output) or " | ".join(output.strip().splitlines()[-3:])
        out(f"baseline FAILED (pytest exit status {code}) -> {failed}")
        return 2

    stale = {m.name: reason for m in mutations if (reason := stale_reason(m, schema)) is not None}
    runnable = [m for m in mutations if m.name not in stale]
    jobs = [(m.apply(schema), tests, helpers) for m in runnable]
    counts = {"killed": 0, "SURVIVED": 0, "STALE": 0, "ERROR": 0}
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = pool.map(run_mutant, jobs)  # in table order, as each completes
        for mutation in mutations:
            reason = stale.get(mutation.name)
            outcome = next(results) if reason is None else Outcome("STALE", reason)
            counts[outcome.status] += 1
            out(f"{outcome.status} {mutation.name} -> {outcome.detail}")
    summary = (
        f"mutations={len(mutations)} killed={counts['killed']} survived={counts['SURVIVED']} "
        f"stale={counts['STALE']} seconds={time.monotonic() - started:.1f}"
    )
    if counts["ERROR"]:
        summary += f" errors={counts['ERROR']}"
    out(summary)
    return 0 if counts["killed"] == len(mutations) else 1


if __name__ == "__main__":
    sys.exit(main())

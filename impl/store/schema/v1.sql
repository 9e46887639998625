-- Run store schema, version 1.
--
-- The initializer splits this script with sqlite3.complete_statement and runs every
-- statement inside one BEGIN IMMEDIATE transaction, so the script holds no transaction
-- control of its own. Every CREATE is unconditional on purpose: a database that already
-- holds a same-named object must fail initialization instead of passing silently.
-- The last statement sets user_version; it is transactional, so a failed initialization
-- leaves the database unversioned.
--
-- Connections must run with foreign_keys=ON (the relational guarantees below are foreign
-- keys) and recursive_triggers=ON (so that the implicit delete done by INSERT OR REPLACE
-- meets the no-delete guards).
--
-- SQL only guards relational shape. Identities, canonical JSON, scientific validity and
-- filesystem facts are established by the writer before it inserts anything.
--
-- Shared value rules, repeated per column because SQLite has no domains:
--   * *_ns columns: INTEGER nanoseconds since the epoch, never negative (STRICT already
--     bounds them to the signed 64-bit range).
--   * retry_index, revision, checkpoint_index: 0 .. 2^53-1, the exact-integer range of
--     canonical JSON, because they are copied into canonical documents.
--   * *_json columns: a JSON object (the writer alone guarantees canonical form).
--   * digests: exactly 64 lowercase hexadecimal characters.
--   * store paths: normalized relative POSIX paths (no empty, '.' or '..' segment, no
--     leading or trailing slash, no backslash, NUL or control character).

-- ---------------------------------------------------------------------------------------
-- Resolved records. The planner registers these once; everything later points at them,
-- so they never change and never disappear.
-- ---------------------------------------------------------------------------------------

-- A decision is kept even when it excludes the candidate: the exclusion is evidence too.
-- The wide UNIQUE key lets a run prove it follows an applicable decision for its own
-- candidate.
CREATE TABLE applicability_decisions (
    id TEXT NOT NULL PRIMARY KEY,
    candidate_id TEXT NOT NULL,
    problem_id TEXT NOT NULL,
    applicable INTEGER NOT NULL CONSTRAINT decision_applicable_is_boolean
        CHECK (applicable IN (0, 1)),
    record_json TEXT NOT NULL CONSTRAINT decision_record_is_object
        CHECK (json_valid(record_json) AND json_type(record_json) = 'object'),
    UNIQUE (id, candidate_id, applicable)
) STRICT;

-- A run can only be resolved from a decision that admitted the same candidate: the
-- constant applicable column turns that into a plain composite foreign key.
CREATE TABLE resolved_runs (
    id TEXT NOT NULL PRIMARY KEY,
    logical_spec_id TEXT NOT NULL,
    decision_id TEXT NOT NULL,
    candidate_id TEXT NOT NULL,
    applicable INTEGER NOT NULL CONSTRAINT run_requires_applicable_decision
        CHECK (applicable = 1),
    record_json TEXT NOT NULL CONSTRAINT run_record_is_object
        CHECK (json_valid(record_json) AND json_type(record_json) = 'object'),
    FOREIGN KEY (decision_id, candidate_id, applicable)
        REFERENCES applicability_decisions (id, candidate_id, applicable)
) STRICT;

-- Execution slots. (id, run_id) and (id, run_id, role) are unique so membership rows can
-- pin both ends of a membership to one run.
CREATE TABLE attempt_slots (
    id TEXT NOT NULL PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES resolved_runs (id),
    logical_slot TEXT NOT NULL,
    execution_kind TEXT NOT NULL CONSTRAINT attempt_slot_execution_kind
        CHECK (execution_kind IN ('one_shot', 'fresh_observation', 'stream')),
    role TEXT NOT NULL CONSTRAINT attempt_slot_role
        CHECK (role IN ('measurement', 'warmup')),
    record_json TEXT NOT NULL CONSTRAINT attempt_slot_record_is_object
        CHECK (json_valid(record_json) AND json_type(record_json) = 'object'),
    UNIQUE (run_id, logical_slot),
    UNIQUE (id, run_id)
) STRICT;

-- Observation slots: one final result, or a numbered checkpoint of a stream.
CREATE TABLE observation_slots (
    id TEXT NOT NULL PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES resolved_runs (id),
    logical_slot TEXT NOT NULL,
    kind TEXT NOT NULL CONSTRAINT observation_slot_kind
        CHECK (kind IN ('result', 'checkpoint')),
    checkpoint_index INTEGER CONSTRAINT observation_slot_checkpoint_index
        CHECK (
            (kind = 'result' AND checkpoint_index IS NULL)
            OR (kind = 'checkpoint' AND checkpoint_index IS NOT NULL
                AND checkpoint_index BETWEEN 0 AND 9007199254740991)
        ),
    record_json TEXT NOT NULL CONSTRAINT observation_slot_record_is_object
        CHECK (json_valid(record_json) AND json_type(record_json) = 'object'),
    UNIQUE (run_id, logical_slot),
    UNIQUE (id, run_id)
) STRICT;

-- Which execution slot may produce each observation slot. The observation slot is the
-- key, so it has exactly one producer; both foreign keys share run_id, so producer and
-- produced belong to the same run.
CREATE TABLE attempt_observation_slots (
    observation_slot_id TEXT NOT NULL PRIMARY KEY,
    attempt_slot_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    UNIQUE (observation_slot_id, attempt_slot_id),
    FOREIGN KEY (observation_slot_id, run_id) REFERENCES observation_slots (id, run_id),
    FOREIGN KEY (attempt_slot_id, run_id) REFERENCES attempt_slots (id, run_id)
) STRICT;

CREATE INDEX attempt_observation_slots_by_attempt_slot
    ON attempt_observation_slots (attempt_slot_id);

-- A warm-up produces nothing that could be measured, so it owns no observation slot.
-- Slots are immutable, so checking the role once at insert is enough.
CREATE TRIGGER attempt_observation_slots_no_warmup_owner
BEFORE INSERT ON attempt_observation_slots
WHEN (SELECT role FROM attempt_slots WHERE id = NEW.attempt_slot_id) = 'warmup'
BEGIN
    SELECT RAISE(ABORT, 'attempt_observation_slots: a warmup slot owns no observation slot');
END;

-- Immutability of the resolved records and their memberships.
CREATE TRIGGER applicability_decisions_no_update
BEFORE UPDATE ON applicability_decisions
BEGIN
    SELECT RAISE(ABORT, 'applicability_decisions: rows are immutable');
END;

CREATE TRIGGER applicability_decisions_no_delete
BEFORE DELETE ON applicability_decisions
BEGIN
    SELECT RAISE(ABORT, 'applicability_decisions: rows cannot be deleted');
END;

CREATE TRIGGER resolved_runs_no_update
BEFORE UPDATE ON resolved_runs
BEGIN
    SELECT RAISE(ABORT, 'resolved_runs: rows are immutable');
END;

CREATE TRIGGER resolved_runs_no_delete
BEFORE DELETE ON resolved_runs
BEGIN
    SELECT RAISE(ABORT, 'resolved_runs: rows cannot be deleted');
END;

CREATE TRIGGER attempt_slots_no_update
BEFORE UPDATE ON attempt_slots
BEGIN
    SELECT RAISE(ABORT, 'attempt_slots: rows are immutable');
END;

CREATE TRIGGER attempt_slots_no_delete
BEFORE DELETE ON attempt_slots
BEGIN
    SELECT RAISE(ABORT, 'attempt_slots: rows cannot be deleted');
END;

CREATE TRIGGER observation_slots_no_update
BEFORE UPDATE ON observation_slots
BEGIN
    SELECT RAISE(ABORT, 'observation_slots: rows are immutable');
END;

CREATE TRIGGER observation_slots_no_delete
BEFORE DELETE ON observation_slots
BEGIN
    SELECT RAISE(ABORT, 'observation_slots: rows cannot be deleted');
END;

CREATE TRIGGER attempt_observation_slots_no_update
BEFORE UPDATE ON attempt_observation_slots
BEGIN
    SELECT RAISE(ABORT, 'attempt_observation_slots: rows are immutable');
END;

CREATE TRIGGER attempt_observation_slots_no_delete
BEFORE DELETE ON attempt_observation_slots
BEGIN
    SELECT RAISE(ABORT, 'attempt_observation_slots: rows cannot be deleted');
END;

-- ---------------------------------------------------------------------------------------
-- Artifacts: verified, completed, content-addressed directories. A row is a claim that
-- the bytes exist and were checked, so it can never be rewritten or withdrawn.
-- ---------------------------------------------------------------------------------------

-- The id and path are functions of kind and content digest; storing them anyway lets
-- other tables use them as keys, and the CHECKs keep the three in agreement. The path is
-- also checked for normal form on its own, ahead of the agreement check, so a malformed
-- path is reported as such.
CREATE TABLE artifacts (
    id TEXT NOT NULL PRIMARY KEY,
    kind TEXT NOT NULL CONSTRAINT artifact_kind
        CHECK (kind IN ('attempt', 'observation', 'result', 'metrics', 'dataset', 'source',
                        'environment', 'other')),
    path TEXT NOT NULL UNIQUE CONSTRAINT artifact_path_normalized
        CHECK (
            ('/' || path || '/') NOT GLOB '*//*'
            AND ('/' || path || '/') NOT GLOB '*/./*'
            AND ('/' || path || '/') NOT GLOB '*/../*'
            AND instr(path, char(92)) = 0
            AND instr(CAST(path AS BLOB), X'00') = 0
            AND path NOT GLOB ('*[' || char(1) || '-' || char(31) || char(127) || '-'
                               || char(159) || ']*')
        ),
    content_sha256 TEXT NOT NULL CONSTRAINT artifact_content_digest
        CHECK (length(content_sha256) = 64 AND content_sha256 NOT GLOB '*[^0-9a-f]*'),
    manifest_sha256 TEXT NOT NULL CONSTRAINT artifact_manifest_digest
        CHECK (length(manifest_sha256) = 64 AND manifest_sha256 NOT GLOB '*[^0-9a-f]*'),
    verified_at_ns INTEGER NOT NULL CONSTRAINT artifact_verified_at_range
        CHECK (verified_at_ns >= 0),
    CONSTRAINT artifact_id_matches_content
        CHECK (id = 'run-store-v1:' || kind || '-' || content_sha256),
    CONSTRAINT artifact_path_matches_content
        CHECK (path = 'artifacts/' || kind || '-' || content_sha256),
    UNIQUE (id, kind)
) STRICT;

CREATE TRIGGER artifacts_no_update
BEFORE UPDATE ON artifacts
BEGIN
    SELECT RAISE(ABORT, 'artifacts: rows are immutable');
END;

CREATE TRIGGER artifacts_no_delete
BEFORE DELETE ON artifacts
BEGIN
    SELECT RAISE(ABORT, 'artifacts: rows cannot be deleted');
END;

-- ---------------------------------------------------------------------------------------
-- Attempts, their event log and their transition history.
-- ---------------------------------------------------------------------------------------

-- The attempt row is a projection of its newest transition. The deferred foreign key to
-- attempt_transitions makes a projection without matching history impossible to commit,
-- while still letting one transaction write the row and its history in either order.
-- Finish fields exist exactly for terminal states; the failure code and censor reason
-- exist exactly for their own outcome.
CREATE TABLE attempts (
    id TEXT NOT NULL PRIMARY KEY,
    slot_id TEXT NOT NULL REFERENCES attempt_slots (id),
    retry_index INTEGER NOT NULL CONSTRAINT attempt_retry_index_range
        CHECK (retry_index BETWEEN 0 AND 9007199254740991),
    state TEXT NOT NULL CONSTRAINT attempt_state
        CHECK (state IN ('reserved', 'materializing', 'starting', 'preparing', 'executing',
                         'checkpointing', 'validating', 'evaluating', 'finalizing',
                         'accepted', 'censored', 'superseded', 'failed')),
    revision INTEGER NOT NULL CONSTRAINT attempt_revision_range
        CHECK (revision BETWEEN 0 AND 9007199254740991),
    started_at_ns INTEGER NOT NULL CONSTRAINT attempt_started_at_range
        CHECK (started_at_ns >= 0),
    updated_at_ns INTEGER NOT NULL CONSTRAINT attempt_updated_at_range
        CHECK (updated_at_ns >= started_at_ns),
    finished_at_ns INTEGER CONSTRAINT attempt_finished_at_range
        CHECK (finished_at_ns >= started_at_ns),
    failure_code TEXT CONSTRAINT attempt_failure_code_nonempty
        CHECK (length(failure_code) > 0),
    censor_reason TEXT CONSTRAINT attempt_censor_reason_nonempty
        CHECK (length(censor_reason) > 0),
    final_artifact_id TEXT,
    final_artifact_kind TEXT CONSTRAINT attempt_final_artifact_kind
        CHECK (final_artifact_kind = 'attempt'),
    record_json TEXT NOT NULL CONSTRAINT attempt_record_is_object
        CHECK (json_valid(record_json) AND json_type(record_json) = 'object'),
    CONSTRAINT attempt_finish_iff_terminal
        CHECK ((state IN ('accepted', 'censored', 'superseded', 'failed'))
               = (finished_at_ns IS NOT NULL)),
    CONSTRAINT attempt_final_artifact_iff_terminal
        CHECK ((state IN ('accepted', 'censored', 'superseded', 'failed'))
               = (final_artifact_id IS NOT NULL AND final_artifact_kind IS NOT NULL)),
    CONSTRAINT attempt_failure_code_iff_failed
        CHECK ((state = 'failed') = (failure_code IS NOT NULL)),
    CONSTRAINT attempt_censor_reason_iff_censored
        CHECK ((state = 'censored') = (censor_reason IS NOT NULL)),
    UNIQUE (slot_id, retry_index),
    UNIQUE (id, slot_id),
    FOREIGN KEY (id, revision, state, updated_at_ns)
        REFERENCES attempt_transitions (attempt_id, revision, to_state, at_ns)
        DEFERRABLE INITIALLY DEFERRED,
    FOREIGN KEY (final_artifact_id, final_artifact_kind) REFERENCES artifacts (id, kind)
) STRICT;

-- Retries may pile up on a slot, but the slot is satisfied by at most one of them.
CREATE UNIQUE INDEX one_accepted_attempt_per_slot
    ON attempts (slot_id) WHERE state = 'accepted';

-- An attempt directory records one attempt's outcome, so no two attempts may commit with
-- the same final artifact (a second attempt claiming it would share the first's outcome).
CREATE UNIQUE INDEX one_attempt_per_final_artifact
    ON attempts (final_artifact_id) WHERE final_artifact_id IS NOT NULL;

-- A new row is always a fresh reservation: revision 0, state reserved, its start time as
-- its last update, nothing finished yet.
CREATE TRIGGER attempts_insert_is_reservation
BEFORE INSERT ON attempts
BEGIN
    SELECT RAISE(ABORT, 'attempts: a new attempt must be reserved at revision 0')
    WHERE NEW.state IS NOT 'reserved' OR NEW.revision IS NOT 0;
    SELECT RAISE(ABORT, 'attempts: a new attempt must be updated at its start time')
    WHERE NEW.updated_at_ns IS NOT NEW.started_at_ns;
    SELECT RAISE(ABORT, 'attempts: a new attempt has no outcome')
    WHERE NEW.finished_at_ns IS NOT NULL OR NEW.failure_code IS NOT NULL
       OR NEW.censor_reason IS NOT NULL OR NEW.final_artifact_id IS NOT NULL
       OR NEW.final_artifact_kind IS NOT NULL;
END;

-- Every update is exactly one step along a legal edge. The checks run in a fixed order so
-- a refusal names the first rule broken. Acceptance additionally needs the attempt to
-- hold its slot's finalization claim at that moment; the claim can only be released after
-- the terminal update, so the order "update, then delete claim" is forced.
CREATE TRIGGER attempts_update_is_one_legal_step
BEFORE UPDATE ON attempts
BEGIN
    SELECT RAISE(ABORT, 'attempts: a terminal attempt is immutable')
    WHERE OLD.state IN ('accepted', 'censored', 'superseded', 'failed');
    SELECT RAISE(ABORT, 'attempts: id, slot_id, retry_index and started_at_ns are immutable')
    WHERE NEW.id IS NOT OLD.id OR NEW.slot_id IS NOT OLD.slot_id
       OR NEW.retry_index IS NOT OLD.retry_index
       OR NEW.started_at_ns IS NOT OLD.started_at_ns;
    SELECT RAISE(ABORT, 'attempts: revision must advance by exactly one')
    WHERE NEW.revision IS NOT OLD.revision + 1;
    SELECT RAISE(ABORT, 'attempts: transition time cannot go backwards')
    WHERE NEW.updated_at_ns < OLD.updated_at_ns;
    SELECT RAISE(ABORT, 'attempts: illegal state transition')
    WHERE (OLD.state || '>' || NEW.state) NOT IN (
        'reserved>materializing', 'materializing>starting', 'starting>preparing',
        'preparing>executing', 'executing>checkpointing', 'checkpointing>validating',
        'validating>evaluating', 'executing>validating', 'evaluating>executing',
        'reserved>finalizing', 'materializing>finalizing', 'starting>finalizing',
        'preparing>finalizing', 'executing>finalizing', 'checkpointing>finalizing',
        'validating>finalizing', 'evaluating>finalizing',
        'finalizing>accepted', 'finalizing>censored', 'finalizing>superseded',
        'finalizing>failed');
    SELECT RAISE(ABORT, 'attempts: acceptance requires the slot finalization claim')
    WHERE NEW.state = 'accepted' AND NOT EXISTS (
        SELECT 1 FROM finalization_claims
        WHERE slot_id = NEW.slot_id AND attempt_id = NEW.id);
END;

-- History is never rewritten, so attempts are never deleted (terminal or not).
CREATE TRIGGER attempts_no_delete
BEFORE DELETE ON attempts
BEGIN
    SELECT RAISE(ABORT, 'attempts: rows cannot be deleted');
END;

-- The global event log. AUTOINCREMENT keeps sequence numbers from ever being reused,
-- so a consumer's position stays meaningful. (sequence, attempt_id, at_ns) is unique so a
-- transition can require its event to carry the same attempt and time.
-- 'observation_registered' announces an observation of an attempt, not a step: the
-- transition trigger's kind check never accepts it, so it can announce no transition.
CREATE TABLE events (
    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CONSTRAINT event_kind
        CHECK (kind IN ('attempt_reserved', 'attempt_transition', 'attempt_finalizing',
                        'attempt_finished', 'observation_registered')),
    attempt_id TEXT REFERENCES attempts (id),
    at_ns INTEGER NOT NULL CONSTRAINT event_at_range CHECK (at_ns >= 0),
    payload_json TEXT NOT NULL CONSTRAINT event_payload_is_object
        CHECK (json_valid(payload_json) AND json_type(payload_json) = 'object'),
    UNIQUE (sequence, attempt_id, at_ns)
) STRICT;

CREATE TRIGGER events_no_update
BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events: rows are insert-only');
END;

CREATE TRIGGER events_no_delete
BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events: rows are insert-only');
END;

-- One row per revision of an attempt, each announced by exactly one event of the same
-- attempt and time. The extra UNIQUE key is the target of the attempts' deferred
-- projection foreign key.
CREATE TABLE attempt_transitions (
    attempt_id TEXT NOT NULL REFERENCES attempts (id),
    revision INTEGER NOT NULL CONSTRAINT transition_revision_range
        CHECK (revision BETWEEN 0 AND 9007199254740991),
    from_state TEXT CONSTRAINT transition_from_state
        CHECK (from_state IN ('reserved', 'materializing', 'starting', 'preparing',
                              'executing', 'checkpointing', 'validating', 'evaluating',
                              'finalizing', 'accepted', 'censored', 'superseded', 'failed')),
    to_state TEXT NOT NULL CONSTRAINT transition_to_state
        CHECK (to_state IN ('reserved', 'materializing', 'starting', 'preparing',
                            'executing', 'checkpointing', 'validating', 'evaluating',
                            'finalizing', 'accepted', 'censored', 'superseded', 'failed')),
    at_ns INTEGER NOT NULL CONSTRAINT transition_at_range CHECK (at_ns >= 0),
    event_sequence INTEGER NOT NULL UNIQUE,
    PRIMARY KEY (attempt_id, revision),
    UNIQUE (attempt_id, revision, to_state, at_ns),
    FOREIGN KEY (event_sequence, attempt_id, at_ns) REFERENCES events (sequence, attempt_id, at_ns)
) STRICT;

-- A transition extends the history by one step: revision 0 is the reservation, every
-- later revision continues from the exact state and no earlier time than its
-- predecessor, along a legal edge, and keeps pace with the attempt row (which is at the
-- predecessor or already at this revision within the same transaction). The event kind
-- says what sort of step it was, so consumers can trust it.
CREATE TRIGGER attempt_transitions_insert_is_next_step
BEFORE INSERT ON attempt_transitions
BEGIN
    SELECT RAISE(ABORT, 'attempt_transitions: revision 0 must be the reservation')
    WHERE (NEW.revision = 0) != (NEW.from_state IS NULL AND NEW.to_state = 'reserved');
    SELECT RAISE(ABORT, 'attempt_transitions: the previous revision is missing')
    WHERE NEW.revision > 0 AND NOT EXISTS (
        SELECT 1 FROM attempt_transitions
        WHERE attempt_id = NEW.attempt_id AND revision = NEW.revision - 1);
    SELECT RAISE(ABORT, 'attempt_transitions: from_state must be the previous to_state')
    WHERE NEW.revision > 0 AND NEW.from_state IS NOT (
        SELECT to_state FROM attempt_transitions
        WHERE attempt_id = NEW.attempt_id AND revision = NEW.revision - 1);
    SELECT RAISE(ABORT, 'attempt_transitions: transition time cannot go backwards')
    WHERE NEW.revision > 0 AND NEW.at_ns < (
        SELECT at_ns FROM attempt_transitions
        WHERE attempt_id = NEW.attempt_id AND revision = NEW.revision - 1);
    SELECT RAISE(ABORT, 'attempt_transitions: illegal state transition')
    WHERE NEW.revision > 0 AND coalesce(NEW.from_state || '>' || NEW.to_state, '') NOT IN (
        'reserved>materializing', 'materializing>starting', 'starting>preparing',
        'preparing>executing', 'executing>checkpointing', 'checkpointing>validating',
        'validating>evaluating', 'executing>validating', 'evaluating>executing',
        'reserved>finalizing', 'materializing>finalizing', 'starting>finalizing',
        'preparing>finalizing', 'executing>finalizing', 'checkpointing>finalizing',
        'validating>finalizing', 'evaluating>finalizing',
        'finalizing>accepted', 'finalizing>censored', 'finalizing>superseded',
        'finalizing>failed');
    SELECT RAISE(ABORT, 'attempt_transitions: must extend the attempt''s current revision')
    WHERE coalesce((SELECT revision FROM attempts WHERE id = NEW.attempt_id), -2)
          NOT IN (NEW.revision - 1, NEW.revision);
    SELECT RAISE(ABORT, 'attempt_transitions: event kind does not match the transition')
    WHERE (SELECT kind FROM events WHERE sequence = NEW.event_sequence) IS NOT (
        CASE
            WHEN NEW.revision = 0 THEN 'attempt_reserved'
            WHEN NEW.to_state = 'finalizing' THEN 'attempt_finalizing'
            WHEN NEW.to_state IN ('accepted', 'censored', 'superseded', 'failed')
                THEN 'attempt_finished'
            ELSE 'attempt_transition'
        END);
END;

CREATE TRIGGER attempt_transitions_no_update
BEFORE UPDATE ON attempt_transitions
BEGIN
    SELECT RAISE(ABORT, 'attempt_transitions: rows are insert-only');
END;

CREATE TRIGGER attempt_transitions_no_delete
BEFORE DELETE ON attempt_transitions
BEGIN
    SELECT RAISE(ABORT, 'attempt_transitions: rows are insert-only');
END;

-- ---------------------------------------------------------------------------------------
-- Leases and finalization claims: who may write, and who may accept.
-- ---------------------------------------------------------------------------------------

-- A lease is fencing state: its token, owner and purpose identify one holder forever.
-- Expiry only moves forward and release is final, so an owner that lost its lease can
-- never find it live again. Rows stay after release and expiry for recovery and audit.
CREATE TABLE leases (
    id TEXT NOT NULL PRIMARY KEY,
    fencing_token INTEGER NOT NULL UNIQUE CONSTRAINT lease_fencing_token_range
        CHECK (fencing_token >= 0),
    owner_token TEXT NOT NULL CONSTRAINT lease_owner_token_nonempty
        CHECK (length(owner_token) > 0),
    attempt_id TEXT REFERENCES attempts (id),
    purpose TEXT NOT NULL CONSTRAINT lease_purpose
        CHECK (purpose IN ('reservation', 'finalization', 'staging')),
    acquired_at_ns INTEGER NOT NULL CONSTRAINT lease_acquired_at_range
        CHECK (acquired_at_ns >= 0),
    expires_at_ns INTEGER NOT NULL CONSTRAINT lease_expires_after_acquired
        CHECK (expires_at_ns > acquired_at_ns),
    released_at_ns INTEGER CONSTRAINT lease_released_after_acquired
        CHECK (released_at_ns >= acquired_at_ns),
    staging_path TEXT CONSTRAINT lease_staging_path_normalized
        CHECK (
            ('/' || staging_path || '/') NOT GLOB '*//*'
            AND ('/' || staging_path || '/') NOT GLOB '*/./*'
            AND ('/' || staging_path || '/') NOT GLOB '*/../*'
            AND instr(staging_path, char(92)) = 0
            AND instr(CAST(staging_path AS BLOB), X'00') = 0
            AND staging_path NOT GLOB ('*[' || char(1) || '-' || char(31) || char(127) || '-'
                                       || char(159) || ']*')
        ),
    CONSTRAINT lease_staging_path_iff_staging
        CHECK ((purpose = 'staging') = (staging_path IS NOT NULL)),
    UNIQUE (id, attempt_id, purpose)
) STRICT;

CREATE INDEX leases_by_attempt ON leases (attempt_id);

CREATE TRIGGER leases_update_guard
BEFORE UPDATE ON leases
BEGIN
    SELECT RAISE(ABORT, 'leases: identity, owner, attempt, purpose and acquisition are immutable')
    WHERE NEW.id IS NOT OLD.id OR NEW.fencing_token IS NOT OLD.fencing_token
       OR NEW.owner_token IS NOT OLD.owner_token OR NEW.attempt_id IS NOT OLD.attempt_id
       OR NEW.purpose IS NOT OLD.purpose OR NEW.acquired_at_ns IS NOT OLD.acquired_at_ns;
    SELECT RAISE(ABORT, 'leases: a released lease is final')
    WHERE OLD.released_at_ns IS NOT NULL
      AND (NEW.released_at_ns IS NOT OLD.released_at_ns
           OR NEW.expires_at_ns IS NOT OLD.expires_at_ns);
    SELECT RAISE(ABORT, 'leases: expiry cannot be shortened')
    WHERE NEW.expires_at_ns < OLD.expires_at_ns;
END;

CREATE TRIGGER leases_no_delete
BEFORE DELETE ON leases
BEGIN
    SELECT RAISE(ABORT, 'leases: rows cannot be deleted');
END;

-- The success claim of an execution slot. The slot is the key, so competing finalizers
-- serialize on it. The composite keys bind the claim to one attempt of that very slot and
-- to a finalization lease of that same attempt.
CREATE TABLE finalization_claims (
    slot_id TEXT NOT NULL PRIMARY KEY,
    attempt_id TEXT NOT NULL,
    lease_id TEXT NOT NULL UNIQUE,
    claimed_at_ns INTEGER NOT NULL CONSTRAINT claim_claimed_at_range
        CHECK (claimed_at_ns >= 0),
    lease_purpose TEXT NOT NULL CONSTRAINT claim_lease_purpose
        CHECK (lease_purpose = 'finalization'),
    FOREIGN KEY (attempt_id, slot_id) REFERENCES attempts (id, slot_id),
    FOREIGN KEY (lease_id, attempt_id, lease_purpose) REFERENCES leases (id, attempt_id, purpose)
) STRICT;

-- A claim needs a live-by-release lease and a slot nobody has satisfied yet.
CREATE TRIGGER finalization_claims_insert_guard
BEFORE INSERT ON finalization_claims
BEGIN
    SELECT RAISE(ABORT, 'finalization_claims: the lease is released')
    WHERE EXISTS (
        SELECT 1 FROM leases WHERE id = NEW.lease_id AND released_at_ns IS NOT NULL);
    SELECT RAISE(ABORT, 'finalization_claims: the slot already has an accepted attempt')
    WHERE EXISTS (
        SELECT 1 FROM attempts WHERE slot_id = NEW.slot_id AND state = 'accepted');
END;

-- Owners never change hands: a claim is replaced only by deleting it.
CREATE TRIGGER finalization_claims_no_update
BEFORE UPDATE ON finalization_claims
BEGIN
    SELECT RAISE(ABORT, 'finalization_claims: rows are immutable');
END;

-- Recovery ordering: a claim is released only after its attempt's outcome is committed,
-- so an expired owner's claim cannot be dropped while its fate is still open.
CREATE TRIGGER finalization_claims_delete_requires_terminal_attempt
BEFORE DELETE ON finalization_claims
WHEN EXISTS (
    SELECT 1 FROM attempts
    WHERE id = OLD.attempt_id
      AND state NOT IN ('accepted', 'censored', 'superseded', 'failed'))
BEGIN
    SELECT RAISE(ABORT, 'finalization_claims: the claiming attempt is not terminal');
END;

-- ---------------------------------------------------------------------------------------
-- Observations and their selection.
-- ---------------------------------------------------------------------------------------

-- A published observation of one slot by one attempt. The membership key ties the
-- producing attempt's execution slot to the slot's declared producer. Observations
-- outlive the fate of their attempt, so they are immutable and undeletable.
-- The observation's own directory is always present: both halves of its typed key are NOT
-- NULL, so the composite foreign key always applies (a NULL half would switch it off).
-- No CHECK pairs their nullness any more: SQLite tests NOT NULL before CHECK, so such a
-- CHECK could never fail and no test could pin it.
CREATE TABLE observations (
    id TEXT NOT NULL PRIMARY KEY,
    slot_id TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    attempt_slot_id TEXT NOT NULL,
    valid INTEGER NOT NULL CONSTRAINT observation_valid_is_boolean CHECK (valid IN (0, 1)),
    completion TEXT NOT NULL CONSTRAINT observation_completion
        CHECK (completion IN ('reached', 'not_reached')),
    artifact_id TEXT NOT NULL,
    artifact_kind TEXT NOT NULL CONSTRAINT observation_artifact_kind
        CHECK (artifact_kind = 'observation'),
    registered_at_ns INTEGER NOT NULL CONSTRAINT observation_registered_at_range
        CHECK (registered_at_ns >= 0),
    record_json TEXT NOT NULL CONSTRAINT observation_record_is_object
        CHECK (json_valid(record_json) AND json_type(record_json) = 'object'),
    UNIQUE (id, slot_id, valid),
    FOREIGN KEY (slot_id, attempt_slot_id)
        REFERENCES attempt_observation_slots (observation_slot_id, attempt_slot_id),
    FOREIGN KEY (attempt_id, attempt_slot_id) REFERENCES attempts (id, slot_id),
    FOREIGN KEY (artifact_id, artifact_kind) REFERENCES artifacts (id, kind)
) STRICT;

CREATE INDEX observations_by_attempt ON observations (attempt_id);

CREATE TRIGGER observations_no_update
BEFORE UPDATE ON observations
BEGIN
    SELECT RAISE(ABORT, 'observations: rows are immutable');
END;

CREATE TRIGGER observations_no_delete
BEFORE DELETE ON observations
BEGIN
    SELECT RAISE(ABORT, 'observations: rows cannot be deleted');
END;

-- The first selection of a slot is the only one: later retries keep their own
-- observations but never displace it. The constant valid column makes "a valid
-- observation of this exact slot" a composite foreign key.
CREATE TABLE selected_observations (
    slot_id TEXT NOT NULL PRIMARY KEY,
    observation_id TEXT NOT NULL,
    valid INTEGER NOT NULL CONSTRAINT selection_requires_valid CHECK (valid = 1),
    selected_at_ns INTEGER NOT NULL CONSTRAINT selection_selected_at_range
        CHECK (selected_at_ns >= 0),
    FOREIGN KEY (observation_id, slot_id, valid) REFERENCES observations (id, slot_id, valid)
) STRICT;

CREATE TRIGGER selected_observations_no_update
BEFORE UPDATE ON selected_observations
BEGIN
    SELECT RAISE(ABORT, 'selected_observations: rows are insert-only');
END;

-- With recursive_triggers=ON this also refuses INSERT OR REPLACE.
CREATE TRIGGER selected_observations_no_delete
BEFORE DELETE ON selected_observations
BEGIN
    SELECT RAISE(ABORT, 'selected_observations: rows are insert-only');
END;

-- ---------------------------------------------------------------------------------------
-- References that keep artifacts alive. Each must name an existing artifact row, so a
-- collector reading committed references never meets a dangling root.
-- ---------------------------------------------------------------------------------------

-- Dependencies and outputs of an attempt. 'final' is reserved for the attempt's own
-- directory, which lives in attempts.final_artifact_id.
CREATE TABLE attempt_artifacts (
    attempt_id TEXT NOT NULL REFERENCES attempts (id),
    role TEXT NOT NULL CONSTRAINT attempt_artifact_role
        CHECK (length(role) > 0 AND role != 'final'),
    artifact_id TEXT NOT NULL REFERENCES artifacts (id),
    PRIMARY KEY (attempt_id, role, artifact_id)
) STRICT;

-- Result, metric and other directories an observation points at.
CREATE TABLE observation_artifacts (
    observation_id TEXT NOT NULL REFERENCES observations (id),
    role TEXT NOT NULL CONSTRAINT observation_artifact_role CHECK (length(role) > 0),
    artifact_id TEXT NOT NULL REFERENCES artifacts (id),
    PRIMARY KEY (observation_id, role, artifact_id)
) STRICT;

-- Roots held by a lease, covering content that no finalized record names yet.
CREATE TABLE leased_artifacts (
    lease_id TEXT NOT NULL REFERENCES leases (id),
    artifact_id TEXT NOT NULL REFERENCES artifacts (id),
    PRIMARY KEY (lease_id, artifact_id)
) STRICT;

-- No reference added late: an attempt's references are part of its outcome, so they are
-- written in the transaction that finishes it, before the terminal update. Once the
-- attempt is terminal its set of roots is closed.
CREATE TRIGGER attempt_artifacts_insert_requires_open_attempt
BEFORE INSERT ON attempt_artifacts
WHEN EXISTS (
    SELECT 1 FROM attempts
    WHERE id = NEW.attempt_id
      AND state IN ('accepted', 'censored', 'superseded', 'failed'))
BEGIN
    SELECT RAISE(ABORT, 'attempt_artifacts: the attempt is terminal');
END;

-- Likewise an observation's directories are fixed by the time its producing attempt ends.
CREATE TRIGGER observation_artifacts_insert_requires_open_attempt
BEFORE INSERT ON observation_artifacts
WHEN EXISTS (
    SELECT 1 FROM observations JOIN attempts ON attempts.id = observations.attempt_id
    WHERE observations.id = NEW.observation_id
      AND attempts.state IN ('accepted', 'censored', 'superseded', 'failed'))
BEGIN
    SELECT RAISE(ABORT, 'observation_artifacts: the producing attempt is terminal');
END;

-- A lease roots content only while it is held: a released lease, or a lease of a finished
-- attempt (whose outcome already names what it keeps), takes no new root.
CREATE TRIGGER leased_artifacts_insert_requires_live_lease
BEFORE INSERT ON leased_artifacts
BEGIN
    SELECT RAISE(ABORT, 'leased_artifacts: the lease is released')
    WHERE EXISTS (
        SELECT 1 FROM leases WHERE id = NEW.lease_id AND released_at_ns IS NOT NULL);
    SELECT RAISE(ABORT, 'leased_artifacts: the lease''s attempt is terminal')
    WHERE EXISTS (
        SELECT 1 FROM leases JOIN attempts ON attempts.id = leases.attempt_id
        WHERE leases.id = NEW.lease_id
          AND attempts.state IN ('accepted', 'censored', 'superseded', 'failed'));
END;

-- References are history: a collector that saw a root must keep seeing it, so no
-- reference is rewritten or withdrawn. With recursive_triggers=ON the delete guards also
-- refuse INSERT OR REPLACE.
CREATE TRIGGER attempt_artifacts_no_update
BEFORE UPDATE ON attempt_artifacts
BEGIN
    SELECT RAISE(ABORT, 'attempt_artifacts: rows are insert-only');
END;

CREATE TRIGGER attempt_artifacts_no_delete
BEFORE DELETE ON attempt_artifacts
BEGIN
    SELECT RAISE(ABORT, 'attempt_artifacts: rows are insert-only');
END;

CREATE TRIGGER observation_artifacts_no_update
BEFORE UPDATE ON observation_artifacts
BEGIN
    SELECT RAISE(ABORT, 'observation_artifacts: rows are insert-only');
END;

CREATE TRIGGER observation_artifacts_no_delete
BEFORE DELETE ON observation_artifacts
BEGIN
    SELECT RAISE(ABORT, 'observation_artifacts: rows are insert-only');
END;

CREATE TRIGGER leased_artifacts_no_update
BEFORE UPDATE ON leased_artifacts
BEGIN
    SELECT RAISE(ABORT, 'leased_artifacts: rows are insert-only');
END;

CREATE TRIGGER leased_artifacts_no_delete
BEFORE DELETE ON leased_artifacts
BEGIN
    SELECT RAISE(ABORT, 'leased_artifacts: rows are insert-only');
END;

PRAGMA user_version = 1;

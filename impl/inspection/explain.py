"""``explain``: everything committed about one attempt slot, read from an inspection snapshot.

Rules of this file: reads only, on a snapshot's private copy, a fixed number of queries per
explanation (each over all of the slot's attempts at once; the event log has no index by
attempt, so it is scanned once). Owner tokens are never read: a lease is shown by its id,
purpose, fencing token, times, staging path and the artifacts it roots. Records are shown from their
``record_json`` as stored; timestamps are integer nanoseconds, in Python and in JSON. The
things read from the store's files are each attempt's environment document, from its
``environment`` artifact after that artifact verified against its registration (plain
reads, following no link; a failure is shown as the environment's ``problem``), and its
logs' paths and ``stderr.log``'s tail, from its attempt artifact by the same rule
(:mod:`runstore.inspection.attempt_logs`).

A target names one slot: an attempt slot id (``attempt-slot:v1:...``); an attempt id
(``attempt:v1:...``: its slot, with that attempt marked ``highlighted``); or a logical spec
id (``<campaign>/<candidate>/<problem>``). A logical spec id whose run has several attempt
slots is ambiguous, so it is refused with ``unknown_slot`` listing them; such a slot is
named as ``<logical spec id>/<logical slot>`` instead. Anything else is ``unknown_slot``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import Final
from typing import TypeVar
from typing import cast

import attrs
from runstore import sql
from runstore.canonical import JSON
from runstore.canonical import decode_object
from runstore.errors import RunStoreError
from runstore.errors import UnknownSlotError
from runstore.inspection.attempt_logs import AttemptLogs
from runstore.inspection.attempt_logs import attempt_logs
from runstore.inspection.reader import SlotSummary
from runstore.inspection.reader import revision_clause
from runstore.inspection.reader import summarize
from runstore.inspection.snapshot import Snapshot
from runstore.store.publication import objects

T = TypeVar("T")
SLOT_PREFIX: Final = "attempt-slot:v1:"
ATTEMPT_PREFIX: Final = "attempt:v1:"
ENVIRONMENT_ROLE: Final = "environment"
ENVIRONMENT_FILE: Final = "environment.json"
"""The runner's role and file name for an attempt's environment (``runstore.runner
.environment``, which inspection may not import; a test checks that they agree)."""
MAX_ENVIRONMENT_BYTES: Final = 1 << 20
_ARTIFACT_PATH: Final = re.compile(r"artifacts/[a-z_]+-[0-9a-f]{64}")


def _object(text: str) -> dict[str, JSON]:
    value = json.loads(text)
    return value if isinstance(value, dict) else {"value": value}


def _json(value: Any) -> JSON:
    """attrs values -> JSON (ints stay ints; a value with its own ``to_json`` uses it)."""
    if isinstance(value, SlotSummary):
        return value.to_json()
    if attrs.has(type(value)):
        fields = attrs.fields(type(value))
        return {field.name: _json(getattr(value, field.name)) for field in fields}
    if isinstance(value, tuple | list):
        return [_json(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _json(item) for key, item in value.items()}
    if value is None or isinstance(value, bool | int | str):
        return value
    raise TypeError(f"cannot serialize {type(value).__name__}")


@attrs.frozen
class ArtifactInfo:
    id: str
    path: str
    kind: str
    content_sha256: str
    manifest_sha256: str
    verified_at_ns: int


@attrs.frozen(kw_only=True)
class Reference:
    """A (role, artifact) reference of an attempt or an observation."""

    role: str
    artifact: ArtifactInfo


@attrs.frozen
class Transition:
    revision: int
    from_state: str | None
    to_state: str
    at_ns: int
    event_sequence: int


@attrs.frozen(kw_only=True)
class Event:
    sequence: int
    kind: str
    at_ns: int
    payload: dict[str, JSON]


def _artifact_list(text: str | None) -> tuple[str, ...]:
    return tuple(sorted(text.split())) if text else ()


@attrs.frozen
class Lease:
    """A lease without its owner token."""

    id: str
    purpose: str
    fencing_token: int
    acquired_at_ns: int
    expires_at_ns: int
    released_at_ns: int | None
    staging_path: str | None
    rooted_artifact_ids: tuple[str, ...] = attrs.field(converter=_artifact_list)


@attrs.frozen(kw_only=True)
class ObservationInfo:
    id: str
    slot_id: str
    logical_slot: str
    valid: bool
    completion: str
    result: dict[str, JSON]
    artifact: ArtifactInfo
    registered_at_ns: int
    selected: bool
    references: tuple[Reference, ...]


@attrs.frozen(kw_only=True)
class EnvironmentInfo:
    """An attempt's ``environment`` reference: its artifact id and the document read from
    the verified artifact, or None with ``problem`` saying why it could not be read."""

    artifact_id: str
    document: dict[str, JSON] | None
    problem: str | None


@attrs.frozen(kw_only=True)
class AttemptInfo:
    id: str
    retry_index: int
    state: str
    revision: int
    started_at_ns: int
    updated_at_ns: int
    finished_at_ns: int | None
    failure_code: str | None
    details: dict[str, JSON] | None
    reason: str | None
    final_artifact: ArtifactInfo | None
    highlighted: bool
    holds_claim: bool
    transitions: tuple[Transition, ...]
    events: tuple[Event, ...]
    leases: tuple[Lease, ...]
    artifacts: tuple[Reference, ...]
    observations: tuple[ObservationInfo, ...]
    environment: EnvironmentInfo | None
    logs: AttemptLogs | None


@attrs.frozen
class ObservationSlotInfo:
    id: str
    logical_slot: str
    kind: str
    checkpoint_index: int | None
    selected_observation_id: str | None
    selected_at_ns: int | None


@attrs.frozen(kw_only=True)
class Explanation:
    """One attempt slot: its summary, decision, run and slot records (``record_json``
    decoded), its observation slots and every attempt by retry index."""

    slot: SlotSummary
    decision: dict[str, JSON]
    run: dict[str, JSON]
    attempt_slot: dict[str, JSON]
    observation_slots: tuple[ObservationSlotInfo, ...]
    attempts: tuple[AttemptInfo, ...]
    highlighted_attempt_id: str | None

    def to_json(self) -> dict[str, JSON]:
        return cast(dict[str, JSON], _json(self))


# --- resolving the target ---------------------------------------------------------------------


def resolve_target(connection: sqlite3.Connection, target: str) -> tuple[str, str | None]:
    """(attempt slot id, highlighted attempt id or None) for ``target`` (module docstring);
    ``unknown_slot`` when it names none."""
    if not isinstance(target, str) or not target:
        raise UnknownSlotError("explain needs a slot id, an attempt id or a logical spec id")
    if target.startswith(SLOT_PREFIX):
        if sql.execute(connection, "SELECT 1 FROM attempt_slots WHERE id = ?", (target,)):
            return target, None
        raise UnknownSlotError(f"no attempt slot {target}")
    if target.startswith(ATTEMPT_PREFIX):
        rows = sql.execute(connection, "SELECT slot_id FROM attempts WHERE id = ?", (target,))
        if rows:
            return str(rows[0][0]), target
        raise UnknownSlotError(f"no attempt {target}")
    # A name means the slot of the pair's latest revision (SPEC.md section 15.9).
    latest, params = revision_clause(None)
    query = (
        "SELECT s.id, s.logical_slot FROM resolved_runs AS r "
        "JOIN attempt_slots AS s ON s.run_id = r.id WHERE r.logical_spec_id = :spec "
        f"AND {latest} ORDER BY s.logical_slot, s.id"
    )
    rows = sql.execute(connection, query, {**params, "spec": target})
    if len(rows) == 1:
        return str(rows[0][0]), None
    if len(rows) > 1:
        named = ", ".join(f"{target}/{logical} ({slot_id})" for slot_id, logical in rows)
        raise UnknownSlotError(f"{target} has {len(rows)} attempt slots; name one: {named}")
    spec, slash, logical_slot = target.rpartition("/")
    if slash:
        rows = sql.execute(
            connection,
            "SELECT s.id FROM resolved_runs AS r JOIN attempt_slots AS s ON s.run_id = r.id "
            f"WHERE r.logical_spec_id = :spec AND s.logical_slot = :slot AND {latest} "
            "ORDER BY s.id",
            {**params, "spec": spec, "slot": logical_slot},
        )
        if len(rows) == 1:
            return str(rows[0][0]), None
    raise UnknownSlotError(f"no attempt slot, attempt or run is named {target!r}")


# --- reading ----------------------------------------------------------------------------------

_ARTIFACT_COLUMNS: Final = "id, path, kind, content_sha256, manifest_sha256, verified_at_ns"


def artifacts_by_id(connection: sqlite3.Connection, ids: set[str]) -> dict[str, ArtifactInfo]:
    """The artifact rows of ``ids`` (those registered), by id, in queries of 500 ids."""
    found: dict[str, ArtifactInfo] = {}
    ordered = sorted(ids)
    for start in range(0, len(ordered), 500):
        chunk = ordered[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        query = f"SELECT {_ARTIFACT_COLUMNS} FROM artifacts WHERE id IN ({marks})"
        for row in sql.execute(connection, query, chunk):
            found[row[0]] = ArtifactInfo(*row)
    return found


def _in(ids: Sequence[str]) -> str:
    return ", ".join("?" for _ in ids) or "NULL"


def explain(snapshot: Snapshot, target: str) -> Explanation:
    """Everything committed about the slot ``target`` names (see the module docstring);
    ``unknown_slot`` when it names none (or, for a logical spec id, several)."""
    connection = snapshot.connection
    slot_id, highlighted = resolve_target(connection, target)
    (summary,), _ = summarize(connection, slot_ids=[slot_id])
    records = sql.execute(
        connection,
        "SELECT d.record_json, r.record_json, s.record_json FROM attempt_slots AS s "
        "JOIN resolved_runs AS r ON r.id = s.run_id "
        "JOIN applicability_decisions AS d ON d.id = r.decision_id WHERE s.id = ?",
        (slot_id,),
    )
    decision, run, attempt_slot = (_object(text) for text in records[0])

    observation_slots = tuple(
        ObservationSlotInfo(*row)
        for row in sql.execute(
            connection,
            "SELECT os.id, os.logical_slot, os.kind, os.checkpoint_index, so.observation_id, "
            "so.selected_at_ns FROM attempt_observation_slots AS m "
            "JOIN observation_slots AS os ON os.id = m.observation_slot_id "
            "LEFT JOIN selected_observations AS so ON so.slot_id = os.id "
            "WHERE m.attempt_slot_id = ? ORDER BY os.logical_slot, os.id",
            (slot_id,),
        )
    )
    attempts = _attempts(connection, slot_id, highlighted, snapshot.root)
    return Explanation(
        slot=summary,
        decision=decision,
        run=run,
        attempt_slot=attempt_slot,
        observation_slots=observation_slots,
        attempts=attempts,
        highlighted_attempt_id=highlighted,
    )


def _grouped(rows: Sequence[sql.Row], make: Callable[..., T]) -> dict[str, tuple[T, ...]]:
    """``make(*row[1:])`` per row, grouped by ``row[0]`` in row order."""
    groups: dict[str, list[T]] = {}
    for key, *fields in rows:
        groups.setdefault(key, []).append(make(*fields))
    return {key: tuple(values) for key, values in groups.items()}


def _attempts(
    connection: sqlite3.Connection, slot_id: str, highlighted: str | None, root: str
) -> tuple[AttemptInfo, ...]:
    rows = sql.execute(
        connection,
        "SELECT id, retry_index, state, revision, started_at_ns, updated_at_ns, finished_at_ns, "
        "failure_code, censor_reason, final_artifact_id, record_json FROM attempts "
        "WHERE slot_id = ? ORDER BY retry_index",
        (slot_id,),
    )
    ids = [str(row[0]) for row in rows]
    marks = _in(ids)

    def select(query: str, keys: Sequence[str] = ids) -> list[sql.Row]:
        return sql.execute(connection, query, keys)

    transitions = _grouped(
        select(
            "SELECT attempt_id, revision, from_state, to_state, at_ns, event_sequence FROM "
            f"attempt_transitions WHERE attempt_id IN ({marks}) ORDER BY attempt_id, revision"
        ),
        Transition,
    )
    events = _grouped(
        select(
            "SELECT attempt_id, sequence, kind, at_ns, payload_json FROM events "
            f"WHERE attempt_id IN ({marks}) ORDER BY sequence"
        ),
        lambda sequence, kind, at_ns, payload: Event(
            sequence=sequence, kind=kind, at_ns=at_ns, payload=_object(payload)
        ),
    )
    # Never select owner_token: it is the lease holder's secret.
    leases = _grouped(
        select(
            "SELECT attempt_id, id, purpose, fencing_token, acquired_at_ns, expires_at_ns, "
            "released_at_ns, staging_path, (SELECT group_concat(la.artifact_id, ' ') "
            "FROM leased_artifacts AS la WHERE la.lease_id = leases.id) "
            f"FROM leases WHERE attempt_id IN ({marks}) ORDER BY fencing_token"
        ),
        Lease,
    )
    references = select(
        "SELECT attempt_id, role, artifact_id FROM attempt_artifacts "
        f"WHERE attempt_id IN ({marks}) ORDER BY attempt_id, role, artifact_id"
    )
    observations = select(
        "SELECT o.attempt_id, o.id, o.slot_id, os.logical_slot, o.valid, o.completion, "
        "o.artifact_id, o.registered_at_ns, o.record_json, "
        "EXISTS (SELECT 1 FROM selected_observations AS so "
        "        WHERE so.slot_id = o.slot_id AND so.observation_id = o.id) "
        "FROM observations AS o JOIN observation_slots AS os ON os.id = o.slot_id "
        f"WHERE o.attempt_id IN ({marks}) ORDER BY o.attempt_id, os.logical_slot, o.id"
    )
    observation_ids = [str(row[1]) for row in observations]
    observation_refs = select(
        "SELECT observation_id, role, artifact_id FROM observation_artifacts "
        f"WHERE observation_id IN ({_in(observation_ids)}) "
        "ORDER BY observation_id, role, artifact_id",
        observation_ids,
    )
    artifact_ids = {str(row[9]) for row in rows if row[9] is not None}
    artifact_ids |= {str(row[2]) for row in (*references, *observation_refs)}
    artifact_ids |= {str(row[6]) for row in observations}
    artifacts = artifacts_by_id(connection, artifact_ids)

    def reference(role: str, artifact_id: str) -> Reference:
        return Reference(role=role, artifact=artifacts[artifact_id])

    attempt_refs = _grouped(references, reference)
    observation_refs_by_id = _grouped(observation_refs, reference)

    def observation(*row: Any) -> ObservationInfo:
        result = _object(row[7]).get("result")
        return ObservationInfo(
            id=row[0],
            slot_id=row[1],
            logical_slot=row[2],
            valid=bool(row[3]),
            completion=row[4],
            result=result if isinstance(result, dict) else {},
            artifact=artifacts[row[5]],
            registered_at_ns=row[6],
            selected=bool(row[8]),
            references=observation_refs_by_id.get(row[0], ()),
        )

    produced = _grouped(observations, observation)
    claim_query = "SELECT attempt_id FROM finalization_claims WHERE slot_id = ?"
    claims = {str(row[0]) for row in select(claim_query, [slot_id])}

    environments: dict[str, EnvironmentInfo] = {}  # attempts of a run mostly share one

    def environment(references: tuple[Reference, ...]) -> EnvironmentInfo | None:
        found = next((r.artifact for r in references if r.role == ENVIRONMENT_ROLE), None)
        if found is None:
            return None
        if found.id not in environments:
            environments[found.id] = _environment(root, found)
        return environments[found.id]

    infos: list[AttemptInfo] = []
    for row in rows:
        attempt_id, index, state, revision, started, updated, finished = row[:7]
        failure_code, reason, final_id, record_json = row[7:]
        details = _object(record_json).get("details")
        infos.append(
            AttemptInfo(
                id=attempt_id,
                retry_index=index,
                state=state,
                revision=revision,
                started_at_ns=started,
                updated_at_ns=updated,
                finished_at_ns=finished,
                failure_code=failure_code,
                details=details if isinstance(details, dict) else None,
                reason=reason,
                final_artifact=None if final_id is None else artifacts[final_id],
                highlighted=attempt_id == highlighted,
                holds_claim=attempt_id in claims,
                transitions=transitions.get(attempt_id, ()),
                events=events.get(attempt_id, ()),
                leases=leases.get(attempt_id, ()),
                artifacts=attempt_refs.get(attempt_id, ()),
                observations=produced.get(attempt_id, ()),
                environment=environment(attempt_refs.get(attempt_id, ())),
                logs=None if final_id is None else attempt_logs(root, artifacts[final_id]),
            )
        )
    return tuple(infos)


def _environment(root: str, artifact: ArtifactInfo) -> EnvironmentInfo:
    """The environment ``artifact`` with its document, or the reason it could not be read."""
    try:
        document = _read_environment(root, artifact)
    except (RunStoreError, OSError, ValueError) as error:
        problem = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
        return EnvironmentInfo(artifact_id=artifact.id, document=None, problem=problem)
    return EnvironmentInfo(artifact_id=artifact.id, document=document, problem=None)


def _read_environment(root: str, artifact: ArtifactInfo) -> dict[str, JSON]:
    """The document of an environment artifact: the artifact must verify against its
    registration and hold ``environment.json`` alone (at most 1 MiB), whose bytes, read
    following no link, must still have the digest its manifest lists."""
    if artifact.kind != ENVIRONMENT_ROLE or not _ARTIFACT_PATH.fullmatch(artifact.path):
        raise ValueError(f"a {artifact.kind:.40} artifact at {artifact.path!r:.120}")
    directory = os.path.join(root, artifact.path)
    completed = objects.verify(directory, sync=False)
    registered = (artifact.content_sha256, artifact.manifest_sha256)
    if (completed.tree_sha256, completed.manifest_sha256) != registered:
        raise ValueError("the artifact does not match its registration")
    if [file.path for file in completed.files] != [ENVIRONMENT_FILE]:
        raise ValueError(f"the artifact does not hold {ENVIRONMENT_FILE} alone")
    (listed,) = completed.files
    if listed.size_bytes > MAX_ENVIRONMENT_BYTES:
        raise ValueError(f"{ENVIRONMENT_FILE} is larger than {MAX_ENVIRONMENT_BYTES} bytes")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    with open(os.open(os.path.join(directory, ENVIRONMENT_FILE), flags), "rb") as handle:
        data = handle.read(listed.size_bytes + 1)
    if hashlib.sha256(data).hexdigest() != listed.sha256:
        raise ValueError(f"{ENVIRONMENT_FILE} changed after it verified")
    return decode_object(data)

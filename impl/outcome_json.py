"""The outcome document's assembly: the canonical version-1 ``outcome.json`` built from
pieces already read (SPEC.md section 13).

Rules of this file: value layer; pure functions only (no I/O, no SQLite, no clock). It
fixes the document's *shape*: its keys, the form of an artifact entry, an observation
entry and a dependency, the outcome object, the decimal-string times and the order of
every list. It reads nothing: which records go into a snapshot is decided twice on
purpose, over SQL by :mod:`runstore.store.publication.outcome_document` and over the model's state
by :mod:`runstore.model.outcome_document`, and both hand their pieces to the functions here,
so the bytes the two produce can be compared for equality. Nothing here carries an owner
token, a lease id, a staging path or a verification, registration or selection time.

Orders: dependencies and an observation's references by (role, artifact id), observation
slots and produced observations by id, selected observations by observation slot id, each
compared as UTF-8 bytes (which is code point order).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Final
from typing import TypeVar

import attrs
from runstore.canonical import JSON
from runstore.canonical import decode_object
from runstore.canonical import encode_built
from runstore.canonical import ns_from_json
from runstore.canonical import ns_to_json
from runstore.errors import InvalidRecordError
from runstore.requests import Accepted
from runstore.requests import Censored
from runstore.requests import Failed
from runstore.requests import Reference
from runstore.requests import Superseded
from runstore.requests import TerminalOutcome

RUN_STORE_VERSION: Final = 1
"""``run_store_version`` of every outcome document this module writes."""

ARTIFACT_KEYS: Final = ("content_sha256", "id", "kind", "manifest_sha256", "path")
"""The keys of an artifact entry: an artifact's indexed columns, never ``verified_at_ns``."""


def _utf8(text: str) -> bytes:
    return text.encode("utf-8")


def artifact_entry(
    artifact_id: str, kind: str, path: str, content_sha256: str, manifest_sha256: str
) -> dict[str, JSON]:
    """An artifact as the document names it: its id, storage kind, store path and its
    content and manifest digests."""
    return {
        "content_sha256": content_sha256,
        "id": artifact_id,
        "kind": kind,
        "manifest_sha256": manifest_sha256,
        "path": path,
    }


def role_entries(references: Sequence[tuple[str, dict[str, JSON]]]) -> list[JSON]:
    """``[{"role", "artifact"}]`` for ``(role, artifact entry)`` pairs, sorted by (role,
    artifact id) as UTF-8 bytes."""

    def key(pair: tuple[str, dict[str, JSON]]) -> tuple[bytes, bytes]:
        artifact_id = pair[1]["id"]
        assert isinstance(artifact_id, str)
        return _utf8(pair[0]), _utf8(artifact_id)

    return [{"artifact": entry, "role": role} for role, entry in sorted(references, key=key)]


def observation_entry(
    record: dict[str, JSON],
    artifact: dict[str, JSON],
    references: Sequence[tuple[str, dict[str, JSON]]],
) -> dict[str, JSON]:
    """An observation in a snapshot: its ``record_json`` object, the entry of its own
    directory and its references (see :func:`role_entries`)."""
    return {"artifact": artifact, "observation": record, "references": role_entries(references)}


def outcome_entry(outcome: TerminalOutcome) -> dict[str, JSON]:
    """``{"state"}``, plus ``"reason"`` for censored and ``"failure_code"`` and
    ``"details"`` for failed."""
    entry: dict[str, JSON] = {"state": outcome.state.value}
    if isinstance(outcome, Censored):
        entry["reason"] = outcome.reason
    elif isinstance(outcome, Failed):
        entry["failure_code"] = outcome.code
        entry["details"] = outcome.details
    return entry


def _record_id(record: dict[str, JSON]) -> bytes:
    record_id = record["id"]
    assert isinstance(record_id, str)
    return _utf8(record_id)


def _observation_id(entry: dict[str, JSON]) -> bytes:
    record = entry["observation"]
    assert isinstance(record, dict)
    return _record_id(record)


def _observation_slot_id(entry: dict[str, JSON]) -> bytes:
    record = entry["observation"]
    assert isinstance(record, dict)
    slot_id = record["slot_id"]
    assert isinstance(slot_id, str)
    return _utf8(slot_id)


def _in_order(
    items: Sequence[dict[str, JSON]], key: Callable[[dict[str, JSON]], bytes]
) -> list[JSON]:
    ordered = sorted(items, key=key)
    entries: list[JSON] = []
    entries.extend(ordered)
    return entries


def snapshot_document(
    *,
    decision: dict[str, JSON],
    run: dict[str, JSON],
    attempt_slot: dict[str, JSON],
    observation_slots: Sequence[dict[str, JSON]],
    produced: Sequence[dict[str, JSON]],
    selected: Sequence[dict[str, JSON]] | None,
) -> dict[str, JSON]:
    """The ``snapshot`` object: the records as ``record_json`` objects, the observation
    slots by id, the produced observations (:func:`observation_entry`) by observation id,
    and, unless ``selected`` is None (a failed or superseded outcome), the selected
    observations by observation slot id."""
    document: dict[str, JSON] = {
        "attempt_slot": attempt_slot,
        "decision": decision,
        "observation_slots": _in_order(observation_slots, _record_id),
        "produced_observations": _in_order(produced, _observation_id),
        "run": run,
    }
    if selected is not None:
        document["selected_observations"] = _in_order(selected, _observation_slot_id)
    return document


def outcome_document(
    *,
    attempt_id: str,
    slot_id: str,
    retry_index: int,
    finalizing_revision: int,
    outcome: TerminalOutcome,
    started_at_ns: int,
    finished_at_ns: int,
    dependencies: Sequence[tuple[str, dict[str, JSON]]],
    snapshot: dict[str, JSON],
) -> bytes:
    """The canonical bytes of ``outcome.json``: ``run_store_version`` 1, the attempt
    (id, slot id, retry index, finalizing revision), :func:`outcome_entry`, the reservation
    start and the finish time as decimal strings, the dependencies (``(role, artifact
    entry)`` pairs, see :func:`role_entries`) and the ``snapshot``
    (:func:`snapshot_document`)."""
    document: dict[str, JSON] = {
        "attempt": {
            "finalizing_revision": finalizing_revision,
            "id": attempt_id,
            "retry_index": retry_index,
            "slot_id": slot_id,
        },
        "dependencies": role_entries(dependencies),
        "finished_at_ns": ns_to_json(finished_at_ns),
        "outcome": outcome_entry(outcome),
        "run_store_version": RUN_STORE_VERSION,
        "snapshot": snapshot,
        "started_at_ns": ns_to_json(started_at_ns),
    }
    return encode_built(document)


K = TypeVar("K")


@attrs.frozen(kw_only=True)
class OutcomeClaim:
    """What an ``outcome.json`` claims, read back: the attempt it names, the outcome, its
    dependencies as references (document order) and the finish time. Recovery rebuilds the
    document from these and compares bytes."""

    attempt_id: str
    outcome: TerminalOutcome
    references: tuple[Reference, ...]
    finished_at_ns: int


_DOCUMENT_KEYS: Final = frozenset(
    {
        "attempt",
        "dependencies",
        "finished_at_ns",
        "outcome",
        "run_store_version",
        "snapshot",
        "started_at_ns",
    }
)


def member(document: dict[str, JSON], key: str, kind: type[K]) -> K:
    """``document[key]``, which must be exactly of type ``kind`` (``invalid_record``)."""
    value = document.get(key)
    if type(value) is not kind:
        raise InvalidRecordError(f"{key} must be a {kind.__name__}")
    assert isinstance(value, kind)
    return value


def _outcome(entry: dict[str, JSON]) -> TerminalOutcome:
    state = member(entry, "state", str)
    shapes: dict[str, tuple[set[str], Callable[[], TerminalOutcome]]] = {
        "accepted": ({"state"}, Accepted),
        "superseded": ({"state"}, Superseded),
        "censored": ({"state", "reason"}, lambda: Censored(reason=member(entry, "reason", str))),
        "failed": (
            {"state", "failure_code", "details"},
            lambda: Failed(
                code=member(entry, "failure_code", str), details=member(entry, "details", dict)
            ),
        ),
    }
    if state not in shapes:
        raise InvalidRecordError(f"outcome state {state!r:.40} is not terminal")
    keys, build = shapes[state]
    if set(entry) != keys:
        raise InvalidRecordError(f"a {state} outcome has exactly the keys {sorted(keys)}")
    return build()


def read_outcome(data: bytes) -> OutcomeClaim:
    """Read the claims of an ``outcome.json``: canonical JSON (the canonical reader's code
    otherwise), then :func:`outcome_claim`."""
    return outcome_claim(decode_object(data))


def outcome_claim(document: dict[str, JSON]) -> OutcomeClaim:
    """The claims of a decoded ``outcome.json`` (SPEC.md section 13): the
    document's exact keys, ``run_store_version`` 1, an attempt id, a terminal outcome,
    ``{"role", "artifact": {"id", ...}}`` dependencies whose roles a
    :class:`~runstore.requests.Reference` takes, and a decimal finish time. Refuses anything
    else with ``invalid_record``. It checks shape only: whether the claims are true is the
    caller's comparison of bytes."""
    if set(document) != _DOCUMENT_KEYS:
        raise InvalidRecordError("not an outcome document: its keys differ")
    if (
        document["run_store_version"] != RUN_STORE_VERSION
        or type(document["run_store_version"]) is not int
    ):
        raise InvalidRecordError("run_store_version must be 1")
    attempt_id = member(member(document, "attempt", dict), "id", str)
    pairs: list[tuple[str, str]] = []
    for item in member(document, "dependencies", list):
        if type(item) is not dict or set(item) != {"artifact", "role"}:
            raise InvalidRecordError("a dependency has exactly the keys artifact and role")
        role = member(item, "role", str)
        pairs.append((role, member(member(item, "artifact", dict), "id", str)))
    outcome = _outcome(member(document, "outcome", dict))
    finished_at_ns = ns_from_json(member(document, "finished_at_ns", str))
    # Roles last, after the rest of the document: of several defects, the first in this
    # order is the one reported.
    references = tuple(Reference(role, artifact_id) for role, artifact_id in pairs)
    return OutcomeClaim(
        attempt_id=attempt_id,
        outcome=outcome,
        references=references,
        finished_at_ns=finished_at_ns,
    )

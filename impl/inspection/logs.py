"""``logs``: one attempt's worker log, whole, from a verified attempt artifact (SPEC.md
section 15.6, "When a slot fails").

Rules of this file: reads only, on a snapshot's private copy and, for the log's bytes, in
place under the store root by :func:`runstore.inspection.attempt_logs.read_log`'s rule
(the whole artifact verifies against its manifest and registration, and the log's bytes
still have their listed digest when read). A target is resolved exactly as ``explain``
resolves it. Nothing is returned unless every check passed, so a caller prints nothing of
a log that does not verify.
"""

from __future__ import annotations

import os
from typing import Final

import attrs
from runstore import sql
from runstore.canonical import JSON
from runstore.errors import LogUnavailableError
from runstore.inspection.attempt_logs import STREAMS
from runstore.inspection.attempt_logs import read_log
from runstore.inspection.explain import ArtifactInfo
from runstore.inspection.explain import resolve_target
from runstore.inspection.snapshot import Snapshot

_ATTEMPTS: Final = (
    "SELECT a.retry_index, a.id, a.state, art.id, art.path, art.kind, art.content_sha256, "
    "art.manifest_sha256, art.verified_at_ns FROM attempts AS a "
    "LEFT JOIN artifacts AS art ON art.id = a.final_artifact_id "
    "WHERE a.slot_id = ? ORDER BY a.retry_index"
)
_NAME: Final = (
    "SELECT r.logical_spec_id || '/' || s.logical_slot FROM attempt_slots AS s "
    "JOIN resolved_runs AS r ON r.id = s.run_id WHERE s.id = ?"
)


@attrs.frozen(kw_only=True)
class AttemptLog:
    """One worker log: its slot (``<campaign>/<candidate>/<problem>/<slot>``), attempt
    (retry index and id), stream (``stdout`` or ``stderr``), absolute path and bytes."""

    slot: str
    slot_id: str
    attempt: int
    attempt_id: str
    stream: str
    path: str
    data: bytes = attrs.field(repr=False)

    def to_json(self) -> dict[str, JSON]:
        """``logs --json``'s document; ``text`` is the bytes as UTF-8, an undecodable
        byte written ``\\xNN``."""
        return {
            "slot": self.slot,
            "slot_id": self.slot_id,
            "attempt": self.attempt,
            "attempt_id": self.attempt_id,
            "stream": self.stream,
            "path": self.path,
            "text": self.data.decode("utf-8", "backslashreplace"),
        }


def attempt_log(
    snapshot: Snapshot, target: str, *, attempt: int | None = None, stream: str = "stderr"
) -> AttemptLog:
    """The ``stream`` log of attempt ``attempt`` (a retry index; None: the latest) of the
    slot ``target`` names.

    Refusals: ``unknown_slot`` for a target that names no slot (as ``explain``);
    ``log_unavailable`` for a stream other than ``stdout`` or ``stderr``, a slot without
    attempts or without that retry index, an attempt without an attempt artifact (it is
    still running, or recovery ended it), an artifact without that log, a log over 64 MiB;
    ``artifact_corrupt`` for an artifact that does not verify or a log that changed after
    it verified.
    """
    if stream not in STREAMS:
        raise LogUnavailableError(f"no stream {stream!r:.40}: choose stdout or stderr")
    connection = snapshot.connection
    slot_id, _highlighted = resolve_target(connection, target)
    ((name,),) = sql.execute(connection, _NAME, (slot_id,))
    rows = sql.execute(connection, _ATTEMPTS, (slot_id,))
    if not rows:
        raise LogUnavailableError(f"{name} has no attempt yet")
    by_index = {int(row[0]): row for row in rows}
    chosen = max(by_index) if attempt is None else attempt
    if chosen not in by_index:
        held = ", ".join(str(index) for index in sorted(by_index))
        raise LogUnavailableError(f"{name} has no attempt {chosen} (its attempts: {held})")
    _index, attempt_id, state, *artifact = by_index[chosen]
    if artifact[0] is None:
        raise LogUnavailableError(
            f"attempt {chosen} of {name} ({state}) has no attempt artifact: no logs were kept"
        )
    registered = ArtifactInfo(*artifact)
    data = read_log(snapshot.root, registered, STREAMS[stream])
    return AttemptLog(
        slot=str(name),
        slot_id=slot_id,
        attempt=chosen,
        attempt_id=str(attempt_id),
        stream=stream,
        path=os.path.join(snapshot.root, registered.path, STREAMS[stream]),
        data=data,
    )

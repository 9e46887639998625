"""Two rules of a pass's edges (SPEC.md sections 14.2 and 14.4), one test each:

- the recovery lock is taken *without waiting* (step 1): held elsewhere, the pass is
  ``busy`` at once, even when the holder would let go a moment later;
- a rejection's message is one line for people of at most 300 characters: a longer one
  (a forged document naming an unknown artifact by a very long id) is cut to its first
  300 (section 14.4).

Rules of this file: "without waiting" is shown without timing anything: the lock's
polling sleep (``time.sleep``, which a wait would call between two tries) is replaced by
one that makes the holder let go, so a pass that waited at all would then take the lock
and run. Expected values are SPEC.md's.
"""

from __future__ import annotations

import time

import pytest
from runstore import ArtifactKind
from runstore import canonical
from runstore import recovery_report as codes
from runstore.store.publication import staging
from runstore.testing import fixtures as sc

from conformance.publication.world import EXPIRES
from conformance.publication.world import PublicationWorld
from conformance.publication.world import refusal_code
from conformance.recovery.world import attempt_row
from conformance.recovery.world import forge_outcome
from conformance.recovery.world import make_object
from conformance.recovery.world import recover
from conformance.recovery.world import store_path

MESSAGE_LIMIT = 300
"""SPEC.md section 14.4: a rejection's message holds at most 300 characters."""


def test_the_recovery_lock_is_tried_once_without_waiting(
    world: PublicationWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md section 14.2 step 1: take ``.run-store-recovery.lock`` exclusively without
    waiting; contention is ``busy`` and nothing was done. A publisher holds the lock
    shared, and would release it if recovery waited even once: the pass is ``busy``, never
    waited, and the expired attempt is untouched."""
    guard = world.executing(sc.slot_fixture())
    held = staging.RecoveryLock(str(world.root), exclusive=False)
    held.__enter__()
    waits: list[float] = []

    def let_go(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 1:
            held.__exit__(None, None, None)

    monkeypatch.setattr(time, "sleep", let_go)
    try:
        code = refusal_code(lambda: recover(world, EXPIRES))
    finally:
        monkeypatch.undo()
        if not waits:
            held.__exit__(None, None, None)
    assert (code, waits) == ("busy", [])
    assert attempt_row(world, guard.attempt_id)["state"] == "executing"


def test_a_rejection_message_longer_than_300_characters_is_cut_to_300(
    world: PublicationWorld,
) -> None:
    """SPEC.md section 14.4: the message is for people, at most 300 characters, cut to
    its first 300 when longer. A candidate naming a dependency by an 800-character id
    (no registered artifact has it: ``unknown_artifact``) is listed with the first 300
    characters of a message that names that id."""
    guard, outcome = world.terminal_scenario("censored")
    document = canonical.decode_object(forge_outcome(world, guard.attempt_id, outcome, (), 5_000))
    long_id = "run-store-v1:dataset-" + "ab" * 400
    document["dependencies"] = [
        {
            "artifact": {
                "content_sha256": "0" * 64,
                "id": long_id,
                "kind": "dataset",
                "manifest_sha256": "0" * 64,
                "path": "artifacts/dataset-" + "ab" * 32,
            },
            "role": "input",
        }
    ]
    runtime = {"outcome.json": canonical.encode(document)}
    candidate = make_object(world, ArtifactKind.ATTEMPT, {"log.txt": b"forged\n"}, runtime)

    (rejection,) = recover(world, EXPIRES).rejected_artifacts
    assert (rejection.path, rejection.code) == (store_path(candidate), codes.UNKNOWN_ARTIFACT)
    assert len(rejection.message) == MESSAGE_LIMIT
    assert long_id[:200] in rejection.message
    assert "\n" not in rejection.message

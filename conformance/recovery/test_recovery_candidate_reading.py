"""How recovery reads a candidate and checks what it depends on (SPEC.md section 14.3),
one test per rule:

- an ``attempt-*`` object whose name is not ``attempt-<its tree hash>`` is ``corrupt``,
  whichever way its name sorts against its hash;
- the ``outcome.json`` judged is the file verification read: one removed, replaced by a
  link, grown, shrunk or rewritten after verification makes the candidate ``corrupt``;
- reading needs no ownership: a candidate whose files another user owns is imported by
  a recoverer that may read them but owns none of them;
- ``dependency_corrupt``: a dependency whose directory holds another verified object (two
  objects swapped) does not verify with its row's digests, whichever of the two is named;
  one that cannot be read (an I/O error) does not verify either; and checking
  dependencies and listed observations synchronizes nothing.

Rules of this file: the change "after verification" is made by wrapping
:func:`runstore.store.publication.objects.verify` so that it changes the file right after
the candidate's verification returns, the instant a concurrent writer would have to hit.
Leftovers are made through ``world.store`` as in :mod:`conformance.recovery.world`;
expected values are SPEC.md's, not the model's.
"""

from __future__ import annotations

import errno
import hashlib
import os
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from runstore import Accepted
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Censored
from runstore import Reference
from runstore import RejectedArtifact
from runstore import durable
from runstore import recovery_report as codes
from runstore.store.publication import objects
from runstore.testing import fixtures as sc

from conformance.capabilities import NOBODY
from conformance.capabilities import owning_nothing
from conformance.publication.world import EXPIRES
from conformance.publication.world import PublicationWorld
from conformance.publication.world import at
from conformance.publication.world import files
from conformance.recovery.world import addresses
from conformance.recovery.world import attempt_row
from conformance.recovery.world import check_interrupted
from conformance.recovery.world import crash_finalization
from conformance.recovery.world import make_object
from conformance.recovery.world import recover
from conformance.recovery.world import store_path

S = AttemptState
ATTEMPT = ArtifactKind.ATTEMPT
OUTCOME = "outcome.json"


def rejected(path: Path, code: str) -> RejectedArtifact:
    return RejectedArtifact(path=store_path(path), code=code, message="")


def unregistered(world: PublicationWorld, path: Path) -> bool:
    """The object is still on disk and no artifact row names it."""
    count = world.rows("SELECT count(*) FROM artifacts WHERE path = ?", (store_path(path),))
    return path.is_dir() and count == [(0,)]


def rejected_and_failed(world: PublicationWorld, candidate: Path, guard_id: str) -> None:
    """One pass rejects ``candidate`` as ``corrupt``, leaves it unregistered, and commits
    the attempt's interrupted failure instead."""
    report = recover(world, EXPIRES)
    assert report.rejected_artifacts == (rejected(candidate, codes.CORRUPT),)
    assert report.imported_artifacts == ()
    assert unregistered(world, candidate)
    check_interrupted(world, guard_id, "reservation_expired", S.FINALIZING)


# --- the name is the address -------------------------------------------------------------------


@pytest.mark.parametrize("digit", ["0", "f"], ids=["sorts-before", "sorts-after"])
def test_an_attempt_object_not_at_its_address_is_corrupt_whichever_way_its_name_sorts(
    world: PublicationWorld, digit: str
) -> None:
    """SPEC.md section 14.3, ``corrupt``: its name is not ``attempt-<its tree hash>``. The
    check is equality: a name whose digits sort before the tree hash and one whose digits
    sort after it are both refused."""
    guard, outcome = world.terminal_scenario("censored")
    orphan = crash_finalization(world, guard, outcome)
    moved = orphan.with_name("attempt-" + digit * 64)
    orphan.rename(moved)
    rejected_and_failed(world, moved, guard.attempt_id)


# --- the outcome.json judged is the one verified -----------------------------------------------


@contextmanager
def changed_after_verification(candidate: Path, change: Callable[[Path], None]) -> Iterator[None]:
    """Apply ``change`` to the candidate's ``outcome.json`` right after the candidate's
    first verification returns (once)."""
    verify = objects.verify
    done: list[bool] = []

    def verify_then_change(path: str, *, sync: bool) -> objects.CompletedObject:
        completed = verify(path, sync=sync)
        if Path(path) == candidate and not done:
            done.append(True)
            target = candidate / OUTCOME
            os.chmod(target, 0o644)
            change(target)
        return completed

    objects.verify = verify_then_change  # type: ignore[assignment]
    try:
        yield
    finally:
        objects.verify = verify
    assert done, "the candidate was never verified"


def rewrite_one_bit(before: bool) -> Callable[[Path], None]:
    """Flip one bit of the file, at the first offset where the changed bytes' SHA-256
    sorts before (``before``) or after the verified one's, so that a check by order
    instead of equality would miss one of the two."""

    def change(path: Path) -> None:
        data = path.read_bytes()
        verified = hashlib.sha256(data).hexdigest()
        for offset in range(len(data)):
            changed = data[:offset] + bytes([data[offset] ^ 0x01]) + data[offset + 1 :]
            if (hashlib.sha256(changed).hexdigest() < verified) == before:
                path.write_bytes(changed)
                return
        raise AssertionError("no offset found")

    return change


def grow(path: Path) -> None:
    with open(path, "ab") as handle:
        handle.write(b" ")


def shrink(path: Path) -> None:
    os.truncate(path, path.stat().st_size - 1)


def link_to_verified_bytes(path: Path) -> None:
    """Replace the file with a symbolic link to a copy of the very bytes verified."""
    copy = path.parent.parent.parent / "outcome-copy.json"
    copy.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(copy)


CHANGES: dict[str, Callable[[Path], None]] = {
    "removed": Path.unlink,
    "linked": link_to_verified_bytes,
    "grown": grow,
    "shrunk": shrink,
    "rewritten-digest-before": rewrite_one_bit(before=True),
    "rewritten-digest-after": rewrite_one_bit(before=False),
}


@pytest.mark.parametrize("case", sorted(CHANGES))
def test_an_outcome_json_changed_after_verification_is_corrupt(
    world: PublicationWorld, case: str
) -> None:
    """SPEC.md section 14.3: the ``outcome.json`` judged is the file verification read,
    read again without following a link; one missing, a link (even to the verified
    bytes), or not the bytes verification hashed makes the candidate ``corrupt``."""
    guard, outcome = world.terminal_scenario("censored")
    orphan = crash_finalization(world, guard, outcome)
    with changed_after_verification(orphan, CHANGES[case]):
        rejected_and_failed(world, orphan, guard.attempt_id)


PARITY = {"budget": 1, "budgets": 0}
"""Each reason's document length modulo 2 (1,509 and 1,510 bytes)."""


@pytest.mark.parametrize("reason", sorted(PARITY))
def test_an_outcome_json_grown_after_verification_is_corrupt_whatever_its_length(
    world: PublicationWorld, reason: str
) -> None:
    """SPEC.md section 14.3: growth after verification is caught for a document of odd
    and of even length alike (the two reasons differ by one byte), not only for some."""
    guard, _ = world.terminal_scenario("censored")
    orphan = crash_finalization(world, guard, Censored(reason=reason))
    parity = (orphan / OUTCOME).stat().st_size % 2
    assert parity == PARITY[reason], "the two reasons must give one odd and one even length"
    with changed_after_verification(orphan, grow):
        rejected_and_failed(world, orphan, guard.attempt_id)


def test_an_empty_outcome_json_grown_after_verification_is_corrupt(
    world: PublicationWorld,
) -> None:
    """SPEC.md section 14.3: even an empty ``outcome.json`` (which would only be
    ``malformed_outcome``) that grows after verification is ``corrupt``: the bytes judged
    are not the bytes verified."""
    candidate = make_object(world, ATTEMPT, {"log.txt": b"forged\n"}, {OUTCOME: b""})
    with changed_after_verification(candidate, grow):
        report = recover(world, EXPIRES)
    assert report.rejected_artifacts == (rejected(candidate, codes.CORRUPT),)
    assert unregistered(world, candidate)


# --- reading needs no ownership ----------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another user needs root")
def test_a_candidate_another_user_owns_is_read_like_any_other(world: PublicationWorld) -> None:
    """SPEC.md section 14.3: reading needs no ownership. A dead publisher's outcome whose
    files and directories belong to another user, readable to the recoverer, is imported
    by a pass that owns none of them and has no privilege standing in for ownership."""
    guard, outcome = world.terminal_scenario("censored")
    orphan = crash_finalization(world, guard, outcome)
    for path in [orphan, *orphan.rglob("*")]:
        os.chown(path, NOBODY, NOBODY)
    with owning_nothing():
        report = recover(world, EXPIRES)
    assert report.rejected_artifacts == ()
    row = attempt_row(world, guard.attempt_id)
    assert (row["state"], row["final_artifact_id"]) == ("censored", f"run-store-v1:{orphan.name}")


# --- dependencies ------------------------------------------------------------------------------


def two_datasets_and_a_candidate(
    world: PublicationWorld, named: int
) -> tuple[str, Path, list[Path]]:
    """An attempt that published two datasets and died after publishing a ``Censored``
    outcome naming dataset ``named`` (0 or 1) as its input: its id, the orphan, and the
    two datasets' directories."""
    guard = world.executing(sc.slot_fixture())
    published = [
        world.publish_artifact(guard, ArtifactKind.DATASET, files(d=data), at(now))
        for data, now in ((b"first", 1_200), (b"second", 1_300))
    ]
    guard = world.finalizing(guard, 1_500)
    reference = Reference("input", published[named].artifact.id)
    orphan = crash_finalization(world, guard, Censored(reason="budget"), [reference])
    return guard.attempt_id, orphan, [world.root / p.artifact.path for p in published]


@pytest.mark.parametrize("named", [0, 1], ids=["first-named", "second-named"])
def test_a_dependency_holding_another_verified_object_is_dependency_corrupt(
    world: PublicationWorld, named: int
) -> None:
    """SPEC.md section 14.3, ``dependency_corrupt``: a dependency must verify on disk
    *with its row's* tree hash and manifest digest. With two datasets' directories swapped,
    each holds a complete object that verifies, but not the one its row names, so the
    candidate is rejected whichever of the two it names (one holds digests that sort
    after its row's, the other before)."""
    attempt_id, orphan, (first, second) = two_datasets_and_a_candidate(world, named)
    scratch = first.with_name("swap")
    first.rename(scratch)
    second.rename(first)
    scratch.rename(second)

    report = recover(world, EXPIRES)
    assert report.rejected_artifacts == (rejected(orphan, codes.DEPENDENCY_CORRUPT),)
    assert unregistered(world, orphan)
    check_interrupted(world, attempt_id, "reservation_expired", S.FINALIZING)


def test_a_dependency_that_cannot_be_read_is_dependency_corrupt(
    world: PublicationWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md section 14.3: a dependency that cannot be read, an I/O error included,
    does not verify: the candidate is ``dependency_corrupt`` (never imported on an
    unread dependency, never a raw ``OSError`` out of the pass)."""
    attempt_id, orphan, (dataset, _) = two_datasets_and_a_candidate(world, 0)
    fstat = os.fstat
    failed: list[str] = []

    def failing_fstat(fd: int) -> os.stat_result:
        if isinstance(fd, int):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(f"{dataset}/"):
                failed.append(target)
                raise OSError(errno.EIO, "injected I/O error")
        return fstat(fd)

    monkeypatch.setattr(os, "fstat", failing_fstat)
    report = recover(world, EXPIRES)
    monkeypatch.undo()
    assert failed
    assert report.rejected_artifacts == (rejected(orphan, codes.DEPENDENCY_CORRUPT),)
    assert unregistered(world, orphan)
    check_interrupted(world, attempt_id, "reservation_expired", S.FINALIZING)


def test_checking_dependencies_and_observations_syncs_nothing(world: PublicationWorld) -> None:
    """SPEC.md section 14.3: checking ``dependency_corrupt`` reads every byte of a
    dependency and of each observation the snapshot lists, and synchronizes nothing of
    them (they were made durable when registered); only the imported object and
    ``artifacts/`` are synced for the import."""
    guard, published = world.ready_to_accept(sc.slot_fixture())
    reference = Reference("input", published.artifact.id)
    orphan = crash_finalization(world, guard, Accepted(), [reference], crash_at=4)
    checked = [world.root / published.artifact.path]
    synced: list[str] = []

    def observer(phase: str, operation: str, target: str) -> None:
        if phase == "before" and operation.startswith("fsync"):
            synced.append(target)

    previous = durable.install_observer(observer)
    try:
        report = recover(world, EXPIRES)
    finally:
        durable.install_observer(previous)
    assert [t.state for t in report.terminals] == [S.ACCEPTED]
    assert addresses(world, ATTEMPT) == [orphan]
    assert any(target.startswith(f"{orphan}/") for target in synced)
    for directory in checked:
        touched = [t for t in synced if t == str(directory) or t.startswith(f"{directory}/")]
        assert touched == [], f"{directory.name} was synced by the check"

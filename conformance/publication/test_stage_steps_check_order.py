"""The publisher's database steps refuse in the order their model twins state
(``runstore.store.publication.publish_tx`` against ``runstore.model.publication``, SPEC.md
section 11 steps 2 and 8, which name ``begin_staging`` and ``publish_staged_artifact``):

- registering a stage: ``out_of_range`` (``now_ns``), then ``invalid_record`` (a staging
  path that is not a normalized store path), then the guarded sequence;
- registering a staged artifact: ``out_of_range``, then ``invalid_record`` for an artifact
  of kind ``attempt`` (SPEC.md 11, "Arguments": final artifacts go through
  ``publish_finalization``), then the guarded sequence and the stage's lease.

``RunStore.publish_artifact`` never passes such arguments (it builds the staging path and
refuses the kind first), so each step is called directly inside the store's write
transaction, beside the model's twin on the model's state; the codes must agree with each
other and with the stated order, and a refused step changes nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest
from runstore import ArtifactKind
from runstore import OwnedAttempt
from runstore import model as m
from runstore.model.state import Refusal
from runstore.store.publication import publish_tx
from runstore.testing import fixtures as sc

from conformance.publication.world import PublicationWorld

GOOD_PATH = "artifacts/.staging-00000000000000000000000000000000"
BAD_PATH = "artifacts/../outside"


def _guards(world: PublicationWorld) -> tuple[OwnedAttempt, OwnedAttempt]:
    """A current guard of an executing attempt and a stale one (its revision before the
    last advance)."""
    stale = world.executing(sc.slot_fixture())
    current = world.finalizing(stale, 1_200)
    return current, stale


def _store_refuses(
    world: PublicationWorld, code: str, step: Callable[[sqlite3.Connection], object]
) -> None:
    """``step`` run in the store's write transaction is refused with ``code`` and changes no
    durable row."""
    world.refused(code, world.store._write, lambda c: (step(c), ()))


def _model_code(result: tuple[m.ModelState, object]) -> str:
    refusal = result[1]
    assert isinstance(refusal, Refusal), refusal
    return refusal.code


@pytest.mark.parametrize(
    ("path", "now_ns", "stale", "code"),
    [
        (BAD_PATH, -1, True, "out_of_range"),
        (BAD_PATH, 2**63, False, "out_of_range"),
        (BAD_PATH, 1_300, True, "invalid_record"),
        (GOOD_PATH, 1_300, True, "stale_revision"),
    ],
    ids=["range before path", "range (2**63) before path", "path before guard", "guard"],
)
def test_registering_a_stage_checks_range_then_path_then_guard_like_begin_staging(
    world: PublicationWorld, path: str, now_ns: int, stale: bool, code: str
) -> None:
    """SPEC.md 11 step 2 (the model's ``begin_staging``): out_of_range (now_ns), then
    invalid_record (the staging path), then the guarded sequence."""
    current, old = _guards(world)
    guard = old if stale else current
    _store_refuses(
        world, code, lambda c: publish_tx.register_stage(c, guard, "staging-x", path, now_ns)
    )
    assert _model_code(m.begin_staging(world.model.state, guard, "staging-x", path, now_ns)) == code


@pytest.mark.parametrize(
    ("stale", "now_ns", "code"),
    [
        (True, -1, "out_of_range"),
        (True, 1_300, "invalid_record"),
        (False, 1_300, "invalid_record"),
    ],
    ids=["range before kind", "kind before guard", "kind before the stage's lease"],
)
def test_an_attempt_artifact_is_refused_before_the_guard_and_stage_like_the_model(
    world: PublicationWorld, stale: bool, now_ns: int, code: str
) -> None:
    """SPEC.md 11 "Arguments" and step 8 (the model's ``publish_staged_artifact``): an
    artifact of kind attempt is invalid_record, checked after out_of_range and before the
    guarded sequence and the stage's lease (here unknown: lease_mismatch had it come
    first)."""
    current, old = _guards(world)
    guard = old if stale else current
    final = sc.artifact(ArtifactKind.ATTEMPT, "final")
    _store_refuses(
        world, code, lambda c: publish_tx.publish_staged(c, guard, "staging-unknown", final, now_ns)
    )
    model = m.publish_staged_artifact(world.model.state, guard, "staging-unknown", final, now_ns)
    assert _model_code(model) == code

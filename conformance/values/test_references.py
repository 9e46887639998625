"""The ``Reference`` value (SPEC.md section 6, "Observations and selections" and "Terminal
commit"): a role and an artifact id, checked when it is built, so no writer or model
operation ever sees a role it must refuse; and the one rule left to a list of them (no
repeats), in :mod:`runstore.shapes`.
"""

from __future__ import annotations

import attrs
import pytest
import runstore
from runstore import canonical
from runstore.errors import InvalidRecordError
from runstore.outcome_json import read_outcome
from runstore.requests import FINAL_ROLE
from runstore.requests import LEASED_ROOT_ROLE
from runstore.requests import Reference
from runstore.shapes import references_refusal

ARTIFACT = "run-store-v1:dataset-" + "0" * 64


def test_a_reference_holds_its_role_and_artifact_id_as_a_frozen_slotted_value() -> None:
    reference = Reference("dataset", ARTIFACT)
    assert (reference.role, reference.artifact_id) == ("dataset", ARTIFACT)
    assert reference == Reference(role="dataset", artifact_id=ARTIFACT)
    assert reference.pair == ("dataset", ARTIFACT)
    assert not hasattr(reference, "__dict__")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        reference.role = "other"  # type: ignore[misc]
    assert len({reference, Reference("dataset", ARTIFACT)}) == 1
    assert runstore.Reference is Reference
    assert Reference(LEASED_ROOT_ROLE, ARTIFACT).role == "leased_root"


def test_references_order_as_their_pairs() -> None:
    pairs = [("log", "b"), ("environment", "z"), ("log", "a"), ("\u00e9", "a"), ("Zeta", "a")]
    assert [r.pair for r in sorted(Reference(*pair) for pair in pairs)] == sorted(pairs)


@pytest.mark.parametrize("role", ["", FINAL_ROLE])
def test_an_empty_or_final_role_is_refused_at_construction(role: str) -> None:
    with pytest.raises(InvalidRecordError) as info:
        Reference(role, ARTIFACT)
    assert info.value.code == "invalid_record"
    assert info.value.message == "reference roles must be nonempty and not 'final'"
    with pytest.raises(InvalidRecordError):
        attrs.evolve(Reference("dataset", ARTIFACT), role=role)


@pytest.mark.parametrize(
    ("role", "artifact_id", "message"),
    [
        (None, ARTIFACT, "a reference's role must be a str, not NoneType"),
        (b"dataset", ARTIFACT, "a reference's role must be a str, not bytes"),
        (("dataset",), ARTIFACT, "a reference's role must be a str, not tuple"),
        ("dataset", 7, "a reference's artifact_id must be a str, not int"),
        ("dataset", None, "a reference's artifact_id must be a str, not NoneType"),
    ],
)
def test_a_field_that_is_not_a_str_is_refused_at_construction(
    role: object, artifact_id: object, message: str
) -> None:
    with pytest.raises(InvalidRecordError) as info:
        Reference(role, artifact_id)  # type: ignore[arg-type]
    assert info.value.message == message


def test_any_other_role_and_any_artifact_id_string_are_taken() -> None:
    """Whether the artifact is registered is the writer's question (``unknown_artifact``)."""
    for role, artifact_id in [("metrics", ""), ("\u00e9cho \U0001f600", "not an id"), ("x", "x")]:
        assert Reference(role, artifact_id).pair == (role, artifact_id)


def test_a_list_may_not_repeat_a_reference() -> None:
    dataset, source = Reference("dataset", ARTIFACT), Reference("source", ARTIFACT)
    assert references_refusal([dataset, source, Reference("dataset", "other")]) is None
    assert references_refusal([]) is None
    refusal = references_refusal([dataset, source, Reference("dataset", ARTIFACT)])
    assert isinstance(refusal, InvalidRecordError)
    assert refusal.message == "a reference repeats an artifact within a role"


def _document(role: str, outcome: object) -> bytes:
    """An outcome document of the right keys with one dependency under ``role``."""
    return canonical.encode(
        {
            "attempt": {"id": "attempt:v1:" + "1" * 64},
            "dependencies": [{"artifact": {"id": ARTIFACT}, "role": role}],
            "finished_at_ns": "5",
            "outcome": outcome,  # type: ignore[dict-item]
            "run_store_version": 1,
            "snapshot": {},
            "started_at_ns": "1",
        }
    )


def test_an_outcome_document_reads_back_its_dependencies_as_references() -> None:
    claim = read_outcome(_document("input", {"state": "accepted"}))
    assert claim.references == (Reference("input", ARTIFACT),)


def test_a_final_role_in_an_outcome_document_is_refused_after_the_rest_of_it() -> None:
    """Recovery rejects such a document as malformed, with the role's message; a document
    that is also malformed elsewhere is refused for that first."""
    with pytest.raises(InvalidRecordError) as info:
        read_outcome(_document(FINAL_ROLE, {"state": "accepted"}))
    assert info.value.message == "reference roles must be nonempty and not 'final'"
    with pytest.raises(InvalidRecordError) as info:
        read_outcome(_document(FINAL_ROLE, {"state": "finalizing"}))
    assert info.value.message == "outcome state 'finalizing' is not terminal"

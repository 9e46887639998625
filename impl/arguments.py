"""The type checks of every public operation's arguments, one function per operation.

Rules of this file: value layer (imports only the errors, enums, records, requests and
receipts); pure functions of the arguments as given, typed ``object`` because callers may
pass anything. Each returns the first ill-typed argument's refusal, in parameter order, as
an ``invalid_record`` :class:`~runstore.errors.InvalidRecordError` naming the parameter and
the type received, or None when every argument has the right type. The store
(:class:`runstore.RunStore`) calls the check first, before opening any transaction, and
raises what it returns; the model (:mod:`runstore.model`) calls it first and returns it as a
``Refusal`` with the input state. Only types are checked here: the records and requests
validate their own fields at construction, ranges stay with
:func:`runstore.rules.range_refusal` (``out_of_range``), and a repeated reference in a list
with :func:`runstore.shapes.references_refusal`.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final
from typing import Protocol
from typing import runtime_checkable

from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.errors import InvalidRecordError
from runstore.errors import RunStoreError
from runstore.receipts import OwnedAttempt
from runstore.records import ApplicabilityDecision
from runstore.records import ArtifactRegistration
from runstore.records import AttemptSlot
from runstore.records import Observation
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun
from runstore.requests import Accepted
from runstore.requests import Censored
from runstore.requests import Failed
from runstore.requests import FirstAttempt
from runstore.requests import LeaseRequest
from runstore.requests import Next
from runstore.requests import Reference
from runstore.requests import Retry
from runstore.requests import Superseded
from runstore.rules import range_refusal


def _refusal(name: str, expected: str, value: object, received: str = "") -> RunStoreError:
    """``invalid_record``: ``name`` must be ``expected``, not ``received`` (by default the
    value's type name)."""
    return InvalidRecordError(f"{name} must be {expected}, not {received or type(value).__name__}")


def _first(*refusals: RunStoreError | None) -> RunStoreError | None:
    """The first of ``refusals`` (one per argument, in parameter order) that is not None."""
    return next((refusal for refusal in refusals if refusal is not None), None)


def _time(name: str, value: object) -> RunStoreError | None:
    """A nanosecond time is an ``int`` and not a ``bool`` (its range is checked later)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return None
    return _refusal(name, "an int", value)


def _text(name: str, value: object) -> RunStoreError | None:
    return None if isinstance(value, str) else _refusal(name, "a str", value)


def _id_text(name: str, value: object) -> RunStoreError | None:
    """An id looked up as it is (no record's text rule applies to it): a ``str`` that is
    Unicode text, since a lone surrogate (``"\\udc80"``) has no UTF-8 form to look up."""
    refusal = _text(name, value)
    if refusal is not None:
        return refusal
    assert isinstance(value, str)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return InvalidRecordError(f"{name} must be Unicode text, not a str with a lone surrogate")
    return None


def _flag(name: str, value: object) -> RunStoreError | None:
    """A real ``bool``: 0 and 1 are refused."""
    return None if isinstance(value, bool) else _refusal(name, "a bool", value)


def _instance(name: str, value: object, *classes: type) -> RunStoreError | None:
    """An instance of one of ``classes`` (a str enum's plain string value is not one)."""
    if isinstance(value, classes):
        return None
    names = [cls.__name__ for cls in classes]
    article = "an" if names[0][0] in "AEIOU" else "a"
    expected = f"{article} {names[0]}" if len(names) == 1 else f"one of {', '.join(names)}"
    return _refusal(name, expected, value)


def _items(
    name: str, value: object, check: Callable[[str, object], RunStoreError | None]
) -> RunStoreError | None:
    """A list or tuple (not a str, bytes, set, mapping or iterator) whose every element
    passes ``check``; an element is named ``name[i]``."""
    if not isinstance(value, list | tuple):
        return _refusal(name, "a list or tuple", value)
    return _first(*(check(f"{name}[{i}]", item) for i, item in enumerate(value)))


def _observation_slot(name: str, value: object) -> RunStoreError | None:
    return _instance(name, value, ObservationSlot)


def _reference(name: str, value: object) -> RunStoreError | None:
    """A :class:`~runstore.requests.Reference` (which checked its own fields when it was
    built); a plain ``(role, artifact_id)`` tuple is not one."""
    return _instance(name, value, Reference)


def register_slots_arguments(
    decision: object, run: object, attempt_slot: object, observation_slots: object
) -> RunStoreError | None:
    """``register_slots``: the three records, then a list or tuple of observation slots."""
    return _first(
        _instance("decision", decision, ApplicabilityDecision),
        _instance("run", run, ResolvedRun),
        _instance("attempt_slot", attempt_slot, AttemptSlot),
        _items("observation_slots", observation_slots, _observation_slot),
    )


def register_exclusion_arguments(decision: object) -> RunStoreError | None:
    """``register_exclusion``: the decision."""
    return _instance("decision", decision, ApplicabilityDecision)


def register_many_arguments(
    items: object, candidate_ids: object, held: object
) -> RunStoreError | None:
    """``register_many``: a list or tuple of items, each an ``ApplicabilityDecision`` (an
    exclusion) or a list or tuple of exactly the four arguments of ``register_slots``
    (named ``items[i].decision`` and so on); then a list or tuple of str; then None or an
    int (not a bool)."""
    return _first(
        _items("items", items, _registration_item),
        _items("candidate_ids", candidate_ids, _text),
        None if held is None else _time("held", held),
    )


def _registration_item(name: str, value: object) -> RunStoreError | None:
    if isinstance(value, ApplicabilityDecision):
        return None
    if not isinstance(value, list | tuple) or len(value) != 4:
        return _refusal(name, "an ApplicabilityDecision or a 4-item list or tuple", value)
    decision, run, attempt_slot, observation_slots = value
    return _first(
        _instance(f"{name}.decision", decision, ApplicabilityDecision),
        _instance(f"{name}.run", run, ResolvedRun),
        _instance(f"{name}.attempt_slot", attempt_slot, AttemptSlot),
        _items(f"{name}.observation_slots", observation_slots, _observation_slot),
    )


def register_one_shot_arguments(
    decision: object, run: object, attempt_slot: object, observation_slot: object
) -> RunStoreError | None:
    """``register_one_shot``: the four records."""
    return _first(
        _instance("decision", decision, ApplicabilityDecision),
        _instance("run", run, ResolvedRun),
        _instance("attempt_slot", attempt_slot, AttemptSlot),
        _observation_slot("observation_slot", observation_slot),
    )


def reserve_arguments(
    slot_id: object, authorization: object, lease: object, now_ns: object
) -> RunStoreError | None:
    """``reserve``: a str, a ``FirstAttempt``, ``Next`` or ``Retry`` (None is no
    authorization, not a retry), a ``LeaseRequest``, a time."""
    return _first(
        _id_text("slot_id", slot_id),
        _instance("authorization", authorization, FirstAttempt, Next, Retry),
        _instance("lease", lease, LeaseRequest),
        _time("now_ns", now_ns),
    )


def advance_arguments(attempt: object, phase: object, now_ns: object) -> RunStoreError | None:
    """``advance``: an ``OwnedAttempt``, an ``AttemptState`` member (its plain string value
    is refused), a time."""
    return _first(
        _instance("attempt", attempt, OwnedAttempt),
        _instance("phase", phase, AttemptState),
        _time("now_ns", now_ns),
    )


def renew_arguments(attempt: object, expires_at_ns: object, now_ns: object) -> RunStoreError | None:
    """``renew``: an ``OwnedAttempt``, two times."""
    return _first(
        _instance("attempt", attempt, OwnedAttempt),
        _time("expires_at_ns", expires_at_ns),
        _time("now_ns", now_ns),
    )


def begin_finalization_arguments(
    attempt: object, lease: object, now_ns: object
) -> RunStoreError | None:
    """``begin_finalization``: an ``OwnedAttempt``, a ``LeaseRequest``, a time."""
    return _first(
        _instance("attempt", attempt, OwnedAttempt),
        _instance("lease", lease, LeaseRequest),
        _time("now_ns", now_ns),
    )


def register_observation_arguments(
    attempt: object,
    observation: object,
    artifact: object,
    references: object,
    select: object,
    now_ns: object,
) -> RunStoreError | None:
    """``register_observation``: an ``OwnedAttempt``, an ``Observation``, an
    ``ArtifactRegistration``, a list or tuple of ``Reference``, a ``bool`` (not 0 or 1), a
    time."""
    return _first(
        _instance("attempt", attempt, OwnedAttempt),
        _instance("observation", observation, Observation),
        _instance("artifact", artifact, ArtifactRegistration),
        _items("references", references, _reference),
        _flag("select", select),
        _time("now_ns", now_ns),
    )


def commit_finalization_arguments(
    attempt: object,
    outcome: object,
    artifact: object,
    references: object,
    finished_at_ns: object,
    now_ns: object,
) -> RunStoreError | None:
    """``commit_finalization``: an ``OwnedAttempt``, an ``Accepted``, ``Censored``,
    ``Superseded`` or ``Failed``, an ``ArtifactRegistration``, references, two times."""
    return _first(
        _instance("attempt", attempt, OwnedAttempt),
        _instance("outcome", outcome, Accepted, Censored, Superseded, Failed),
        _instance("artifact", artifact, ArtifactRegistration),
        _items("references", references, _reference),
        _time("finished_at_ns", finished_at_ns),
        _time("now_ns", now_ns),
    )


def begin_staging_arguments(
    attempt: object, lease_id: object, staging_path: object, now_ns: object
) -> RunStoreError | None:
    """The model's ``begin_staging``: an ``OwnedAttempt``, two str, a time."""
    return _first(
        _instance("attempt", attempt, OwnedAttempt),
        _text("lease_id", lease_id),
        _text("staging_path", staging_path),
        _time("now_ns", now_ns),
    )


def publish_staged_artifact_arguments(
    attempt: object, staging_lease_id: object, artifact: object, now_ns: object
) -> RunStoreError | None:
    """The model's ``publish_staged_artifact``: an ``OwnedAttempt``, a str, an
    ``ArtifactRegistration``, a time."""
    return _first(
        _instance("attempt", attempt, OwnedAttempt),
        _text("staging_lease_id", staging_lease_id),
        _instance("artifact", artifact, ArtifactRegistration),
        _time("now_ns", now_ns),
    )


def _callable(name: str, value: object) -> RunStoreError | None:
    return None if callable(value) else _refusal(name, "callable", value)


def publish_artifact_arguments(
    attempt: object, kind: object, populate: object, clock: object
) -> RunStoreError | None:
    """``publish_artifact``: an ``OwnedAttempt``, an ``ArtifactKind``, two callables."""
    return _first(
        _instance("attempt", attempt, OwnedAttempt),
        _instance("kind", kind, ArtifactKind),
        _callable("populate", populate),
        _callable("clock", clock),
    )


def publish_kind_refusal(kind: ArtifactKind) -> RunStoreError | None:
    """``publish_artifact`` publishes every kind but ``attempt`` (final artifacts are
    published by ``publish_finalization``): ``invalid_record``, checked right after the
    argument types."""
    if kind is ArtifactKind.ATTEMPT:
        return InvalidRecordError("attempt artifacts are published by publish_finalization")
    return None


def publish_finalization_arguments(
    attempt: object, outcome: object, references: object, populate: object, clock: object
) -> RunStoreError | None:
    """``publish_finalization``: an ``OwnedAttempt``, an outcome, references, two
    callables."""
    return _first(
        _instance("attempt", attempt, OwnedAttempt),
        _instance("outcome", outcome, Accepted, Censored, Superseded, Failed),
        _items("references", references, _reference),
        _callable("populate", populate),
        _callable("clock", clock),
    )


def clock_sample(value: object) -> RunStoreError | None:
    """A publisher's clock sample: an ``int`` that is not a ``bool`` (``invalid_record``),
    in 0..2^63-1 (``out_of_range``)."""
    refusal = _time("clock()", value)
    if refusal is not None:
        return refusal
    assert isinstance(value, int)
    return range_refusal(ns=[("clock()", value)])


def check_finalization_arguments(
    attempt: object, outcome: object, references: object, now_ns: object
) -> RunStoreError | None:
    """The model's ``check_finalization``: an ``OwnedAttempt``, an outcome, references,
    a time."""
    return _first(
        _instance("attempt", attempt, OwnedAttempt),
        _instance("outcome", outcome, Accepted, Censored, Superseded, Failed),
        _items("references", references, _reference),
        _time("now_ns", now_ns),
    )


def publish_finalization_commit_arguments(
    attempt: object,
    staging_lease_id: object,
    outcome: object,
    artifact: object,
    references: object,
    snapshot: object,
    finished_at_ns: object,
    now_ns: object,
) -> RunStoreError | None:
    """The model's ``publish_finalization`` (the publisher's final transaction): the
    arguments of ``commit_finalization`` plus the stage's lease id and the document's
    snapshot (a dict)."""
    return _first(
        _instance("attempt", attempt, OwnedAttempt),
        _text("staging_lease_id", staging_lease_id),
        _instance("outcome", outcome, Accepted, Censored, Superseded, Failed),
        _instance("artifact", artifact, ArtifactRegistration),
        _items("references", references, _reference),
        _instance("snapshot", snapshot, dict),
        _time("finished_at_ns", finished_at_ns),
        _time("now_ns", now_ns),
    )


@runtime_checkable
class DiskDescription(Protocol):
    """The shape of the model's ``runstore.model.DiskView`` (SPEC.md section 14, "The
    model"). The value layer may not import the model, so ``recover``'s ``disk`` is checked
    against these attributes; the view validates its own contents when it is built."""

    @property
    def stages(self) -> Mapping[str, bool]: ...

    @property
    def objects(self) -> Mapping[str, object]: ...

    @property
    def corrupt(self) -> frozenset[str]: ...


def recover_arguments(t_ns: object, disk: object) -> RunStoreError | None:
    """The model's ``recover``: a time, then a ``DiskView`` (see :class:`DiskDescription`)."""
    return _first(
        _time("t_ns", t_ns),
        None if isinstance(disk, DiskDescription) else _refusal("disk", "a DiskView", disk),
    )


def id_list_arguments(name: str, ids: object) -> RunStoreError | None:
    """The coordinator reads' argument: a list or tuple of str (a bare str is refused, not
    read as a sequence of one-character ids)."""
    return _items(name, ids, _id_text)


OPERATIONS: Final[Mapping[str, Callable[..., RunStoreError | None]]] = MappingProxyType(
    {
        "register_slots": register_slots_arguments,
        "register_one_shot": register_one_shot_arguments,
        "register_exclusion": register_exclusion_arguments,
        "reserve": reserve_arguments,
        "advance": advance_arguments,
        "renew": renew_arguments,
        "begin_finalization": begin_finalization_arguments,
        "register_observation": register_observation_arguments,
        "commit_finalization": commit_finalization_arguments,
        "begin_staging": begin_staging_arguments,
        "publish_staged_artifact": publish_staged_artifact_arguments,
        "recover": recover_arguments,
        "publish_artifact": publish_artifact_arguments,
        "publish_finalization": publish_finalization_arguments,
        "check_finalization": check_finalization_arguments,
        "publish_finalization_commit": publish_finalization_commit_arguments,
    }
)
"""Operation name -> its argument check, for the tests."""

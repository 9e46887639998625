"""Ill-typed arguments at every public entry point (CONVENTIONS 13, SPEC section 9:
``invalid_record``): first :mod:`runstore.arguments` on its own, then end to end through the
real store and the model.

The parameters of every operation are data (:data:`PARAMETERS`): a name and a
:class:`Kind`, which says, independently of the module under test, which values are well
typed and how to draw hostile ones. Hypothesis draws from them.

(a) Unit tests of :mod:`runstore.arguments`: valid arguments pass, any well-typed value in
any position passes (ranges are not checked there), any ill-typed value in any position is
refused with ``invalid_record`` naming the parameter and the type received, and with several
bad arguments the first in parameter order is reported.

(b) ``*_end_to_end``: one ill-typed argument among valid ones, on a real store holding a
registered one-shot slot and a reserved attempt, must raise ``RunStoreError`` with code
``invalid_record`` naming the parameter, leave ``run.sqlite3`` and ``run.sqlite3-wal``
byte-for-byte unchanged and deliver no event; the same call on the model must return the
very same state object with an ``invalid_record`` ``Refusal``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from collections.abc import Iterator
from decimal import Decimal
from fractions import Fraction
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from runstore import Accepted
from runstore import ApplicabilityDecision
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import AttemptSlot
from runstore import AttemptState
from runstore import Censored
from runstore import ExecutionKind
from runstore import Failed
from runstore import FirstAttempt
from runstore import LeaseRequest
from runstore import Next
from runstore import Observation
from runstore import ObservationSlot
from runstore import OwnedAttempt
from runstore import Reference
from runstore import ResolvedRun
from runstore import Retry
from runstore import Superseded
from runstore import arguments
from runstore import model as m
from runstore.errors import InvalidRecordError
from runstore.testing import factories
from runstore.testing import fixtures as sc
from runstore.testing.lockstep import ModelRefusal
from runstore.testing.lockstep import ModelWriter
from runstore.testing.publishing import at
from runstore.testing.publishing import files

from conformance.writer.world import EXPIRES
from conformance.writer.world import World

# --- the operations' arguments, as data ---------------------------------------------------

FIXTURE = sc.slot_fixture()
"""The one-shot measurement the store holds (registered, attempt 0 reserved)."""
STREAM = sc.slot_fixture(ExecutionKind.STREAM, name="stream")
LEASE = sc.lease("lease-main", EXPIRES)
GUARD = OwnedAttempt.reserved(FIXTURE.slot_id, 0, LEASE)
"""The guard ``reserve(FIXTURE.slot_id, FirstAttempt(), LEASE, 1_000)`` returns."""
NOW = 1_001

VALID: dict[str, tuple[object, ...]] = {
    "register_slots": FIXTURE.arguments(),
    "register_one_shot": (*FIXTURE.arguments()[:3], FIXTURE.observation_slots[0]),
    "register_exclusion": (factories.decision(applicable=False),),
    "reserve": (FIXTURE.slot_id, FirstAttempt(), sc.lease("lease-next", EXPIRES), NOW),
    "advance": (GUARD, AttemptState.MATERIALIZING, NOW),
    "renew": (GUARD, 2 * EXPIRES, NOW),
    "begin_finalization": (GUARD, sc.lease("lease-claim", EXPIRES), NOW),
    "register_observation": (
        GUARD,
        sc.observation(FIXTURE.observation_slots[0], GUARD),
        sc.artifact(ArtifactKind.OBSERVATION, "observation"),
        (),
        True,
        NOW,
    ),
    "commit_finalization": (
        GUARD,
        Accepted(),
        sc.artifact(ArtifactKind.ATTEMPT, "final"),
        (),
        NOW,
        NOW,
    ),
    "begin_staging": (GUARD, "stage-lease", "artifacts/.staging-0", NOW),
    "publish_staged_artifact": (
        GUARD,
        "stage-lease",
        sc.artifact(ArtifactKind.DATASET, "dataset"),
        NOW,
    ),
    "recover": (NOW, m.DiskView()),
    "publish_artifact": (GUARD, ArtifactKind.DATASET, files(**{"data.bin": b"1"}), at(NOW).fresh()),
    "publish_finalization": (GUARD, Accepted(), (), files(), at(NOW).fresh()),
    "check_finalization": (GUARD, Accepted(), (), NOW),
    "publish_finalization_commit": (
        GUARD,
        "stage-lease",
        Accepted(),
        sc.artifact(ArtifactKind.ATTEMPT, "final"),
        (),
        {},
        NOW,
        NOW,
    ),
}
"""Well-typed arguments of each operation (the state the model takes first is left out)."""

RECORDS: tuple[object, ...] = (
    *FIXTURE.arguments()[:3],
    *FIXTURE.observation_slots,
    *STREAM.observation_slots,
    *VALID["register_observation"][1:3],
    VALID["commit_finalization"][2],
    LEASE,
    GUARD,
    FirstAttempt(),
    Next(retry=False),
    Next(retry=True),
    Retry(next_index=1, max_index=3),
    Accepted(),
    Censored(reason="flaky"),
    Superseded(),
    Failed(code="crashed", details={"signal": 9}),
    Reference("dataset", VALID["register_observation"][2].id),
)
"""One or more instances of every value class an operation takes."""

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # nan and infinities included
    st.integers().map(float),
    st.decimals(),
    st.fractions(),
    st.complex_numbers(),
    st.text(max_size=8),
    st.sampled_from([state.value for state in AttemptState]),
    st.sampled_from(list(ExecutionKind)),
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.tuples(st.text(max_size=3), st.integers()),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
    st.frozensets(st.integers(), max_size=2),
    st.builds(object),
    st.builds(lambda: (item for item in (1, 2))),
    st.sampled_from(RECORDS),
)
"""Values of every sort; each :class:`Kind` keeps the ones it does not accept."""


NOTHING: st.SearchStrategy[Any] = st.nothing()


@attrs.frozen
class Kind:
    """What a parameter accepts: ``accepts`` says (from SPEC's types, not from the module
    under test) whether a value is well typed; ``valid`` draws well-typed values; ``hostile``
    draws ill-typed ones (:data:`SCALARS` and ``near`` misses, less what ``accepts``)."""

    accepts: Callable[[object], bool]
    valid: st.SearchStrategy[Any]
    near: st.SearchStrategy[Any] = NOTHING

    hostile: st.SearchStrategy[Any] = attrs.field(init=False)

    @hostile.default
    def _hostile(self) -> st.SearchStrategy[Any]:
        return st.one_of(SCALARS, self.near).filter(lambda value: not self.accepts(value))


def instance(*classes: type) -> Kind:
    return Kind(
        lambda value: isinstance(value, classes),
        st.sampled_from([record for record in RECORDS if isinstance(record, classes)]),
    )


def sequence_of(element: Kind, bad: st.SearchStrategy[Any], *more: st.SearchStrategy[Any]) -> Kind:
    """A list or tuple of ``element``s; near misses put one ``bad`` element among good
    ones, or pass a set, a dict, a generator or a bare element (or ``more``)."""
    good = st.lists(element.valid, max_size=3)
    spoiled = st.tuples(good, bad, good).map(lambda parts: [*parts[0], parts[1], *parts[2]])
    return Kind(
        lambda value: isinstance(value, list | tuple) and all(map(element.accepts, value)),
        st.one_of(good, good.map(tuple)),
        st.one_of(
            spoiled,
            spoiled.map(tuple),
            element.valid,
            good.map(lambda items: (item for item in items)),
            good.map(lambda items: dict(enumerate(items))),
            st.sets(element.valid, min_size=1, max_size=2),
            *more,
        ),
    )


TIME = Kind(
    lambda value: isinstance(value, int) and not isinstance(value, bool),
    st.integers(),  # any int: the range is runstore.rules' business, later
    st.one_of(st.integers().map(str), st.integers().map(Decimal), st.integers().map(Fraction)),
)
TEXT = Kind(lambda value: isinstance(value, str), st.text(), st.just(FIXTURE.slot_id.encode()))
FLAG = Kind(lambda value: isinstance(value, bool), st.booleans(), st.sampled_from([0, 1, "true"]))
PHASE = Kind(lambda value: isinstance(value, AttemptState), st.sampled_from(list(AttemptState)))
PLAIN_PAIRS = st.tuples(st.text(max_size=4), st.text(max_size=4))
"""The ``(role, artifact_id)`` tuples a :class:`Reference` stands for: never one itself."""
REFERENCE = Kind(
    lambda value: isinstance(value, Reference),
    st.builds(Reference, st.text(min_size=1, max_size=4).filter(lambda r: r != "final"), st.text()),
    st.one_of(PLAIN_PAIRS, PLAIN_PAIRS.map(list)),
)
BAD_REFERENCE = st.one_of(
    PLAIN_PAIRS,
    PLAIN_PAIRS.map(list),
    st.text(min_size=2, max_size=2),  # "ab" unpacks into a role and an id: still refused
    st.tuples(st.text(max_size=3), st.text(max_size=3), st.text(max_size=3)),
    st.builds(lambda: {"role": "artifact"}),
    SCALARS.filter(lambda value: not REFERENCE.accepts(value)),
)
REFERENCES = sequence_of(
    REFERENCE,
    BAD_REFERENCE,
    st.just(Reference("role", "artifact-id")),  # a bare reference
)
OBSERVATION_SLOTS = sequence_of(
    instance(ObservationSlot), SCALARS.filter(lambda value: not isinstance(value, ObservationSlot))
)
ATTEMPT = instance(OwnedAttempt)
LEASE_REQUEST = instance(LeaseRequest)
ARTIFACT = instance(ArtifactRegistration)
OUTCOME = instance(Accepted, Censored, Superseded, Failed)
KIND = Kind(
    lambda value: isinstance(value, ArtifactKind),
    st.sampled_from(list(ArtifactKind)),
    st.sampled_from([kind.value for kind in ArtifactKind]),
)
CALLABLE = Kind(
    callable,
    st.sampled_from([files(), at(0).fresh(), lambda path: None]),
    st.sampled_from([files(), at(0)]).map(attrs.asdict),
)
DISK = Kind(
    lambda value: isinstance(value, m.DiskView),
    st.just(m.DiskView()),
    st.sampled_from(
        [{"stages": {}, "objects": {}, "corrupt": frozenset()}, m.DiskObject(registration=None)]
    ),
)
SNAPSHOT = Kind(lambda value: isinstance(value, dict), st.dictionaries(st.text(), st.integers()))

PARAMETERS: dict[str, tuple[tuple[str, Kind], ...]] = {
    "register_slots": (
        ("decision", instance(ApplicabilityDecision)),
        ("run", instance(ResolvedRun)),
        ("attempt_slot", instance(AttemptSlot)),
        ("observation_slots", OBSERVATION_SLOTS),
    ),
    "register_one_shot": (
        ("decision", instance(ApplicabilityDecision)),
        ("run", instance(ResolvedRun)),
        ("attempt_slot", instance(AttemptSlot)),
        ("observation_slot", instance(ObservationSlot)),
    ),
    "register_exclusion": (("decision", instance(ApplicabilityDecision)),),
    "reserve": (
        ("slot_id", TEXT),
        ("authorization", instance(FirstAttempt, Next, Retry)),
        ("lease", LEASE_REQUEST),
        ("now_ns", TIME),
    ),
    "advance": (("attempt", ATTEMPT), ("phase", PHASE), ("now_ns", TIME)),
    "renew": (("attempt", ATTEMPT), ("expires_at_ns", TIME), ("now_ns", TIME)),
    "begin_finalization": (("attempt", ATTEMPT), ("lease", LEASE_REQUEST), ("now_ns", TIME)),
    "register_observation": (
        ("attempt", ATTEMPT),
        ("observation", instance(Observation)),
        ("artifact", ARTIFACT),
        ("references", REFERENCES),
        ("select", FLAG),
        ("now_ns", TIME),
    ),
    "commit_finalization": (
        ("attempt", ATTEMPT),
        ("outcome", instance(Accepted, Censored, Superseded, Failed)),
        ("artifact", ARTIFACT),
        ("references", REFERENCES),
        ("finished_at_ns", TIME),
        ("now_ns", TIME),
    ),
    "begin_staging": (
        ("attempt", ATTEMPT),
        ("lease_id", TEXT),
        ("staging_path", TEXT),
        ("now_ns", TIME),
    ),
    "publish_staged_artifact": (
        ("attempt", ATTEMPT),
        ("staging_lease_id", TEXT),
        ("artifact", ARTIFACT),
        ("now_ns", TIME),
    ),
    "recover": (("t_ns", TIME), ("disk", DISK)),
    "publish_artifact": (
        ("attempt", ATTEMPT),
        ("kind", KIND),
        ("populate", CALLABLE),
        ("clock", CALLABLE),
    ),
    "publish_finalization": (
        ("attempt", ATTEMPT),
        ("outcome", OUTCOME),
        ("references", REFERENCES),
        ("populate", CALLABLE),
        ("clock", CALLABLE),
    ),
    "check_finalization": (
        ("attempt", ATTEMPT),
        ("outcome", OUTCOME),
        ("references", REFERENCES),
        ("now_ns", TIME),
    ),
    "publish_finalization_commit": (
        ("attempt", ATTEMPT),
        ("staging_lease_id", TEXT),
        ("outcome", OUTCOME),
        ("artifact", ARTIFACT),
        ("references", REFERENCES),
        ("snapshot", SNAPSHOT),
        ("finished_at_ns", TIME),
        ("now_ns", TIME),
    ),
}
"""Each operation's parameters in order, with what each accepts."""

MODEL_ONLY = (
    "begin_staging",
    "publish_staged_artifact",
    "recover",
    "check_finalization",
    "publish_finalization_commit",
)
"""Model operations that are not (yet) ``RunStore`` methods."""
PUBLISHERS = ("publish_artifact", "publish_finalization")
"""``RunStore`` methods whose model side is ``ModelWriter``'s method of the same name."""
WRITERS = [op for op in PARAMETERS if op not in MODEL_ONLY and op not in PUBLISHERS]
"""The operations that are ``RunStore`` methods (and model operations of the same name)."""

POSITIONS = [
    pytest.param(operation, index, id=f"{operation}-{name}")
    for operation, parameters in PARAMETERS.items()
    for index, (name, _) in enumerate(parameters)
]


def replaced(operation: str, index: int, value: object) -> list[object]:
    """The valid arguments of ``operation`` with argument ``index`` replaced by ``value``."""
    args = list(VALID[operation])
    args[index] = value
    return args


def call(function: Callable[..., Any], operation: str, args: list[object], *first: object) -> Any:
    """``function(*first, ...)`` with ``operation``'s arguments ``args``: in parameter order,
    the keyword-only ones (``register_observation``'s ``select`` and ``now_ns``) by name."""
    names = [name for name, _ in PARAMETERS[operation]]
    parameters = inspect.signature(function).parameters.values()
    keyword = {p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}
    named = dict(zip(names, args, strict=True))
    positional = [value for name, value in named.items() if name not in keyword]
    return function(*first, *positional, **{name: named[name] for name in keyword})


def names_parameter(message: str, name: str) -> bool:
    """Whether ``message`` is about ``name`` (itself or one of its elements, ``name[i]``)."""
    return re.match(rf"{re.escape(name)}[ \[]", message) is not None


# --- (a) runstore.arguments on its own ----------------------------------------------------


def test_there_is_one_check_per_operation_with_the_operations_parameters() -> None:
    assert set(arguments.OPERATIONS) == set(PARAMETERS)
    for operation, check in arguments.OPERATIONS.items():
        assert check is getattr(arguments, f"{operation}_arguments")
        names = [name for name, _ in PARAMETERS[operation]]
        assert list(inspect.signature(check).parameters) == names


@pytest.mark.parametrize("operation", list(PARAMETERS))
def test_valid_arguments_pass(operation: str) -> None:
    assert arguments.OPERATIONS[operation](*VALID[operation]) is None


@pytest.mark.parametrize(("operation", "index"), POSITIONS)
@settings(max_examples=15)
@given(data=st.data())
def test_any_well_typed_value_passes(operation: str, index: int, data: st.DataObject) -> None:
    """Including out-of-range times, empty sequences, any reference and every enum member."""
    _, kind = PARAMETERS[operation][index]
    value = data.draw(kind.valid, label="value")
    assert arguments.OPERATIONS[operation](*replaced(operation, index, value)) is None


@pytest.mark.parametrize(("operation", "index"), POSITIONS)
@settings(max_examples=25)
@given(data=st.data())
def test_an_ill_typed_value_is_refused_naming_its_parameter(
    operation: str, index: int, data: st.DataObject
) -> None:
    name, kind = PARAMETERS[operation][index]
    value = data.draw(kind.hostile, label="value")
    error = arguments.OPERATIONS[operation](*replaced(operation, index, value))
    assert isinstance(error, InvalidRecordError)
    assert error.code == "invalid_record"
    assert names_parameter(error.message, name), error.message
    if error.message.startswith(f"{name} "):  # the value itself, not one of its elements
        assert error.message.endswith(f", not {type(value).__name__}"), error.message


@pytest.mark.parametrize("operation", list(PARAMETERS))
@settings(max_examples=15)
@given(data=st.data())
def test_the_first_ill_typed_argument_in_parameter_order_is_reported(
    operation: str, data: st.DataObject
) -> None:
    parameters = PARAMETERS[operation]
    spoiled = data.draw(st.sets(st.integers(0, len(parameters) - 1), min_size=1), label="positions")
    args = list(VALID[operation])
    for index in spoiled:
        args[index] = data.draw(parameters[index][1].hostile, label=parameters[index][0])
    error = arguments.OPERATIONS[operation](*args)
    assert error is not None
    assert names_parameter(error.message, parameters[min(spoiled)][0]), error.message


@pytest.mark.parametrize(("operation", "index"), POSITIONS)
@settings(max_examples=15)
@given(data=st.data())
def test_the_check_agrees_with_the_parameters_type(
    operation: str, index: int, data: st.DataObject
) -> None:
    """On values of any sort, well typed or not: refused exactly when ill typed."""
    _, kind = PARAMETERS[operation][index]
    value = data.draw(st.one_of(SCALARS, kind.valid, kind.near), label="value")
    error = arguments.OPERATIONS[operation](*replaced(operation, index, value))
    assert (error is None) == kind.accepts(value), error


SLOT = FIXTURE.observation_slots[0]


@pytest.mark.parametrize(
    ("operation", "index", "value", "message"),
    [
        ("advance", 1, "materializing", "phase must be an AttemptState, not str"),
        ("advance", 2, 110.5, "now_ns must be an int, not float"),
        ("advance", 2, True, "now_ns must be an int, not bool"),
        ("advance", 0, None, "attempt must be an OwnedAttempt, not NoneType"),
        (
            "reserve",
            1,
            None,
            "authorization must be one of FirstAttempt, Next, Retry, not NoneType",
        ),
        ("reserve", 0, b"slot", "slot_id must be a str, not bytes"),
        ("reserve", 2, attrs.asdict(LEASE), "lease must be a LeaseRequest, not dict"),
        ("renew", 1, Decimal(20_000), "expires_at_ns must be an int, not Decimal"),
        ("register_observation", 4, 1, "select must be a bool, not int"),
        ("register_observation", 3, "ab", "references must be a list or tuple, not str"),
        (
            "register_observation",
            3,
            [("role", "artifact")],
            "references[0] must be a Reference, not tuple",
        ),
        (
            "commit_finalization",
            3,
            (Reference("role", "artifact"), ["role", "artifact"]),
            "references[1] must be a Reference, not list",
        ),
        (
            "publish_finalization",
            2,
            [Reference("role", "artifact"), ("role", "artifact")],
            "references[1] must be a Reference, not tuple",
        ),
        (
            "commit_finalization",
            3,
            {Reference("role", "artifact")},
            "references must be a list or tuple, not set",
        ),
        (
            "commit_finalization",
            1,
            AttemptState.ACCEPTED,
            "outcome must be one of Accepted, Censored, Superseded, Failed, not AttemptState",
        ),
        ("commit_finalization", 4, "1001", "finished_at_ns must be an int, not str"),
        (
            "register_slots",
            3,
            (SLOT, 5),
            "observation_slots[1] must be an ObservationSlot, not int",
        ),
        ("register_slots", 3, {SLOT}, "observation_slots must be a list or tuple, not set"),
        (
            "register_slots",
            3,
            SLOT,
            "observation_slots must be a list or tuple, not ObservationSlot",
        ),
        ("register_one_shot", 3, [SLOT], "observation_slot must be an ObservationSlot, not list"),
        ("recover", 0, float("nan"), "t_ns must be an int, not float"),
        ("recover", 1, {}, "disk must be a DiskView, not dict"),
    ],
)
def test_pinned_refusal_messages(operation: str, index: int, value: object, message: str) -> None:
    """The escapes these checks close (a phase's plain string raised AttributeError, a
    float time became a database error, True was taken as 1, a None authorization as a
    retry), an int for select, and the message of each shape of refusal."""
    error = arguments.OPERATIONS[operation](*replaced(operation, index, value))
    assert isinstance(error, InvalidRecordError)
    assert error.message == message


def test_a_generator_of_observation_slots_is_refused_without_being_consumed() -> None:
    consumed: list[ObservationSlot] = []

    def slots() -> Iterator[ObservationSlot]:
        consumed.append(SLOT)
        yield SLOT

    error = arguments.register_slots_arguments(*FIXTURE.arguments()[:3], slots())
    assert error is not None and error.message.endswith("not generator")
    assert consumed == []


# --- (b) end to end: the real store and the model ------------------------------------------


@pytest.fixture
def reserved(world: World) -> World:
    """The group's world (a fresh store and the model, in lockstep) with :data:`FIXTURE`
    registered and its attempt 0 reserved as :data:`GUARD`."""
    world.register(FIXTURE)
    assert world.reserve(FIXTURE.slot_id, FirstAttempt(), LEASE, 1_000) == GUARD
    return world


def store_refuses(world: World, operation: str, args: list[object]) -> str:
    """The store refuses ``operation`` on ``args`` with ``invalid_record`` and leaves
    everything :meth:`~World.untouched`; returns the message."""
    operation_of = getattr(world.store, operation)
    refusal = world.refused_untouched("invalid_record", lambda: call(operation_of, operation, args))
    return refusal.message


def model_refuses(world: World, operation: str, args: list[object]) -> str:
    """The model refuses the same call with ``invalid_record`` and keeps its very state
    (through the model's writer for a publisher, the operation itself otherwise); returns
    the message."""
    state = world.model.state
    if operation in PUBLISHERS:
        writer = ModelWriter(state)
        with pytest.raises(ModelRefusal) as refusal:
            call(getattr(writer, operation), operation, args)
        assert refusal.value.code == "invalid_record"
        assert writer.state is state
        return str(refusal.value).removeprefix("invalid_record: ")
    new_state, result = call(getattr(m, operation), operation, args, state)
    assert new_state is state
    assert isinstance(result, m.Refusal), result
    assert result.code == "invalid_record", result
    return result.message


def one_ill_typed(operation: str, data: st.DataObject) -> tuple[str, list[object]]:
    """``operation``'s valid arguments with one of them, drawn, ill typed; and its name."""
    index = data.draw(st.integers(0, len(PARAMETERS[operation]) - 1), label="index")
    name, kind = PARAMETERS[operation][index]
    return name, replaced(operation, index, data.draw(kind.hostile, label=name))


# One store per test function, shared by its examples on purpose: each example must leave
# it byte-for-byte as it was, which is what the test checks.
END_TO_END = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.mark.parametrize("operation", WRITERS)
@END_TO_END
@given(data=st.data())
def test_store_and_model_refuse_one_ill_typed_argument_end_to_end(
    reserved: World, operation: str, data: st.DataObject
) -> None:
    name, args = one_ill_typed(operation, data)
    for message in (
        store_refuses(reserved, operation, args),
        model_refuses(reserved, operation, args),
    ):
        assert names_parameter(message, name), message


@pytest.mark.parametrize("operation", PUBLISHERS)
@END_TO_END
@given(data=st.data())
def test_publishers_refuse_one_ill_typed_argument_before_anything_exists(
    reserved: World, operation: str, data: st.DataObject
) -> None:
    """Nothing is created: no database write, no ``artifacts/`` directory, no stage, no
    recovery lock file; the model's writer refuses with the same code, state unchanged."""
    name, args = one_ill_typed(operation, data)
    for message in (
        store_refuses(reserved, operation, args),
        model_refuses(reserved, operation, args),
    ):
        assert names_parameter(message, name), message


def test_publish_artifact_refuses_the_attempt_kind_before_anything_exists(reserved: World) -> None:
    args = replaced("publish_artifact", 1, ArtifactKind.ATTEMPT)
    assert store_refuses(reserved, "publish_artifact", args) == model_refuses(
        reserved, "publish_artifact", args
    )


def test_register_observation_takes_select_and_now_by_keyword_only(reserved: World) -> None:
    """On the store, the model and the model's writer: a positional ``select`` (which an
    int time could otherwise slip into) is a ``TypeError`` before anything happens."""
    store_args = VALID["register_observation"]
    writers: list[tuple[Callable[..., Any], tuple[object, ...]]] = [
        (reserved.store.register_observation, store_args),
        (m.register_observation, (reserved.model.state, *store_args)),
        (ModelWriter(reserved.model.state).register_observation, store_args),
    ]
    before, state = reserved.untouched(), reserved.model.state
    for function, args in writers:
        parameters = inspect.signature(function).parameters
        kinds = {name: parameters[name].kind for name in ("select", "now_ns")}
        assert set(kinds.values()) == {inspect.Parameter.KEYWORD_ONLY}, function
        with pytest.raises(TypeError):
            function(*args)
    assert reserved.untouched() == before
    assert reserved.model.state is state


@pytest.mark.parametrize(
    "operation", ["register_observation", "commit_finalization", "publish_finalization"]
)
def test_a_plain_pair_for_a_reference_is_refused_before_anything_is_written(
    reserved: World, operation: str
) -> None:
    """The ``(role, artifact_id)`` tuple a ``Reference`` stands for, well formed in every
    other way (a permitted role, the call's own artifact): ``invalid_record`` naming it,
    nothing written or created; the model refuses it alike and keeps its state."""
    pair = ("metrics", VALID["register_observation"][2].id)
    index = [name for name, _ in PARAMETERS[operation]].index("references")
    args = replaced(operation, index, [Reference(*pair), pair])
    expected = "references[1] must be a Reference, not tuple"
    assert store_refuses(reserved, operation, args) == expected
    assert model_refuses(reserved, operation, args) == expected


@pytest.mark.parametrize("operation", MODEL_ONLY)
@END_TO_END
@given(data=st.data())
def test_model_only_operations_refuse_one_ill_typed_argument_end_to_end(
    reserved: World, operation: str, data: st.DataObject
) -> None:
    name, args = one_ill_typed(operation, data)
    message = model_refuses(reserved, operation, args)
    assert names_parameter(message, name), message


def test_ill_typed_phases_times_outcomes_and_references_are_refused_untouched(
    world: World,
) -> None:
    """Hand-picked ill-typed calls a user made (a phase as a string, a float or a bool time,
    no outcome, a list for a reference): each a typed refusal that opens no transaction."""
    fixture = world.registered()
    guard = world.start(fixture, "reservation-0")
    store, phase, ill = world.store, AttemptState.MATERIALIZING, "invalid_record"
    world.refused_untouched(ill, lambda: store.advance(guard, "materializing", 1_100))  # type: ignore[arg-type]
    world.refused_untouched(ill, lambda: store.advance(guard, phase, 110.5))  # type: ignore[arg-type]
    world.refused_untouched(ill, lambda: store.advance(guard, phase, True))
    lease = sc.lease("reservation-1", 10_000)
    world.refused_untouched(ill, lambda: store.reserve(fixture.slot_id, FirstAttempt(), lease, 1.0))  # type: ignore[arg-type]
    claimed = world.claim(world.walk(guard, sc.EXECUTION_PATH, 1_100), "claim-0", 1_200).attempt
    final = sc.artifact(ArtifactKind.ATTEMPT, "attempt-0")
    world.refused_untouched(
        ill,
        lambda: store.commit_finalization(claimed, None, final, (), 1_300, 1_300),  # type: ignore[arg-type]
    )
    pair = [["a", final.id]]
    world.refused_untouched(
        ill,
        lambda: store.commit_finalization(claimed, Accepted(), final, pair, 1, 2),  # type: ignore[arg-type]
    )
    # Out of range stays out_of_range (checked after the types), also untouched.
    failed = AttemptState.FAILED
    world.refused_untouched("out_of_range", lambda: store.advance(claimed, failed, 2**63))
    world.check()

"""Writer calls (``runstore.testing.script.Call``) as driver requests, and the vector files'
operations as calls (SPEC.md section 18.3).

Rules of this file: pure functions. A call's arguments are written in the vector files'
forms (a registration's decision as ``candidate``), its guard whole (SPEC.md section
18.1, "Guards on the wire"), payloads as ``entries`` and clocks as their readings. A clock
that a script steps by other than 1 ns is written with its first 64 readings, enough for
any one operation (publication samples a handful).
"""

from __future__ import annotations

from typing import Any

from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
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
from runstore.requests import Retry
from runstore.requests import Superseded
from runstore.testing.publishing import ClockScript
from runstore.testing.publishing import Payload
from runstore.testing.script import GUARDED
from runstore.testing.script import Call

from .wire import artifact_of
from .wire import authorization_of
from .wire import authorization_wire
from .wire import guard_wire
from .wire import integer
from .wire import lease_of
from .wire import lease_wire
from .wire import outcome_of
from .wire import outcome_wire
from .wire import references_of
from .wire import references_wire

RECORDS = (
    ApplicabilityDecision,
    ResolvedRun,
    AttemptSlot,
    ObservationSlot,
    Observation,
    ArtifactRegistration,
)
WIRE_NAMES = {"decision": "candidate"}
"""Parameters the protocol (like the vector files) names otherwise."""
CLOCK_READINGS = 64


def clock_samples(clock: ClockScript) -> list[str]:
    readings = list(clock.samples)
    if clock.step != 1:
        while len(readings) < CLOCK_READINGS:
            readings.append(readings[-1] + clock.step)
    return [str(reading) for reading in readings]


def payload_entries(payload: Payload) -> list[dict[str, Any]]:
    """What ``payload`` writes, as ``content.json`` entry descriptions in the order it
    writes them (parents before children; a file's directories implied)."""
    entries: list[dict[str, Any]] = [{"path": d, "type": "directory"} for d in payload.directories]
    entries += [
        {"path": p, "type": "file", "data_hex": data.hex(), "executable": p in payload.executables}
        for p, data in payload.files
    ]
    entries += [{"path": p, "type": "symlink", "target": t} for p, t in payload.symlinks]
    return entries + [{"path": p, "type": "fifo"} for p in payload.fifos]


def argument_wire(key: str, value: Any) -> Any:
    """One argument in its protocol form."""
    if isinstance(value, RECORDS):
        return value.to_json()
    if isinstance(value, LeaseRequest):
        return lease_wire(value)
    if isinstance(value, FirstAttempt | Next | Retry):
        return authorization_wire(value)
    if isinstance(value, Accepted | Censored | Failed | Superseded):
        return outcome_wire(value)
    if isinstance(value, AttemptState | ArtifactKind):
        return value.value
    if isinstance(value, ClockScript):
        return clock_samples(value)
    if isinstance(value, Payload):
        return payload_entries(value)
    if key == "references":
        return references_wire(value)
    if key == "observation_slots":
        return [slot.to_json() for slot in value]
    if type(value) is int:
        return str(value)
    if isinstance(value, str | bool) or value is None:
        return value
    raise TypeError(f"argument {key}: no protocol form for {type(value).__name__}")


def request_of(call: Call, guard: OwnedAttempt | None) -> tuple[str, dict[str, Any]]:
    """The request making ``call`` (with ``guard`` for a guarded operation)."""
    args = {WIRE_NAMES.get(k, k): argument_wire(k, v) for k, v in call.arguments.items()}
    if call.operation == "publish_artifact" or call.operation == "publish_finalization":
        args["entries"] = args.pop("populate")
    if call.operation in GUARDED:
        assert guard is not None
        args["guard"] = guard_wire(guard)
    return call.operation, args


def _clock_of(text: str) -> ClockScript:
    return ClockScript(samples=(integer(text, "clock"),))


def call_of_operation(operation: dict[str, Any]) -> Call:
    """An operation of ``events.json``, ``outcomes.json`` or ``recovery.json`` as a call;
    a guarded one's handle is its ``attempt_id``, a reservation's the attempt it makes."""
    name, a = operation["operation"], operation["arguments"]
    label = operation.get("name", name)
    if name == "register_slots":
        arguments: dict[str, Any] = {
            "decision": ApplicabilityDecision.from_json(a["candidate"]),
            "run": ResolvedRun.from_json(a["run"]),
            "attempt_slot": AttemptSlot.from_json(a["attempt_slot"]),
            "observation_slots": [ObservationSlot.from_json(s) for s in a["observation_slots"]],
        }
        return Call(label, name, arguments)
    if name == "register_one_shot":
        arguments = {
            "decision": ApplicabilityDecision.from_json(a["candidate"]),
            "run": ResolvedRun.from_json(a["run"]),
            "attempt_slot": AttemptSlot.from_json(a["attempt_slot"]),
            "observation_slot": ObservationSlot.from_json(a["observation_slot"]),
        }
        return Call(label, name, arguments)
    if name == "recover":
        return Call(label, name, {"clock": _clock_of(a["clock"])})
    now = integer(a["now_ns"], "now_ns")
    if name == "reserve":
        arguments = {
            "slot_id": a["slot_id"],
            "authorization": authorization_of(a["authorization"]),
            "lease": lease_of(a["lease"]),
            "now_ns": now,
        }
        return Call(label, name, arguments, attempt=operation["result"]["attempt_id"])
    handle = a["attempt_id"]
    if name == "advance":
        return Call(label, name, {"phase": AttemptState(a["phase"]), "now_ns": now}, handle)
    if name == "begin_finalization":
        return Call(label, name, {"lease": lease_of(a["lease"]), "now_ns": now}, handle)
    common = {
        "artifact": artifact_of(a["artifact"]),
        "references": references_of(a["references"]),
        "now_ns": now,
    }
    if name == "register_observation":
        observation = Observation.from_json(a["observation"])
        arguments = {"observation": observation, **common, "select": a["select"]}
        return Call(label, name, arguments, handle)
    if name != "commit_finalization":
        raise ValueError(f"unknown operation {name!r}")
    arguments = {
        "outcome": outcome_of(a["outcome"]),
        **common,
        "finished_at_ns": integer(a["finished_at_ns"], "finished_at_ns"),
    }
    return Call(label, name, arguments, handle)

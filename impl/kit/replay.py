"""The writer-level and store-level vector files replayed through a driver (SPEC.md section
18.4): ``events.json``, every case of ``outcomes.json`` and of ``recovery.json``, each on a
fresh store in a new root, in lockstep with the model.

Rules of this file: each operation's result is compared with the file's and with the
model's, and the projection after it with the model's (which holds the file's events);
then the case's own pins (the outcome document's bytes; the recovered object's files,
read from the root). The first difference fails the check.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from .calls import call_of_operation
from .cases import Drivers
from .client import ProtocolFailure
from .pair import Mismatch
from .pair import Pair
from .pair import Unsupported
from .report import FAIL
from .report import NOT_IMPLEMENTED
from .report import Check
from .report import first_difference
from .values import read_vectors
from .wire import same


def _compare_bytes(label: str, wanted_hex: str, got: bytes) -> None:
    wanted = bytes.fromhex(wanted_hex)
    if got != wanted:
        raise Mismatch(f"{label}: " + first_difference(wanted, got))


def _play(pair: Pair, operations: list[dict[str, Any]]) -> None:
    context: dict[str, Any] = {}
    for operation in operations:
        call = call_of_operation(operation)
        kind, result = pair.apply(call, context)
        if kind != "ok" or not same(result, operation["result"]):
            raise Mismatch(f"{call.name}: gave {kind} {result!r}, the file has the result")
        pair.check_projection(call.name)


def _outcome_case(pair: Pair, case: dict[str, Any]) -> None:
    _play(pair, case["operations"])
    args = {k: case[k] for k in ("attempt_id", "outcome", "references", "finished_at_ns")}
    reply = pair.driver.request("outcome_document", args)
    if reply.kind == "unsupported":
        raise Unsupported("outcome_document is unsupported")
    if reply.kind != "result":
        raise Mismatch(f"outcome_document gave {reply.kind} {reply.value!r}")
    _compare_bytes("outcome.json", case["outcome_hex"], bytes.fromhex(reply.value["outcome_hex"]))


def _recovery_case(pair: Pair, case: dict[str, Any]) -> None:
    _play(pair, [*case["operations"], case["recover"]])
    final = case["final_artifact"]
    directory = os.path.join(pair.root, final["path"])
    for name, key in (("outcome.json", "outcome_hex"), ("manifest.json", "manifest_hex")):
        try:
            with open(os.path.join(directory, name), "rb") as handle:
                data = handle.read()
        except OSError as error:
            raise Mismatch(f"{final['path']}/{name} cannot be read: {error.strerror}") from None
        _compare_bytes(f"{final['path']}/{name}", case[key], data)
    rows = {row[0]: row for row in pair.projection()["attempts"]}
    got = rows.get(case["attempt_id"], [None] * 11)[10]
    if got != final["id"]:
        raise Mismatch(f"the attempt's final artifact is {got!r}, not {final['id']!r}")


def _run_case(drivers: Drivers, check: Check, label: str, play: Any) -> bool:
    """One case on a fresh store; False (with ``check`` failed) on its first difference."""
    with tempfile.TemporaryDirectory(prefix="runstore-kit-") as root:
        driver = drivers.current()
        pair = Pair(driver, root)
        try:
            pair.open()
            play(pair)
            pair.expect_result("close", {})
        except ProtocolFailure as failure:
            drivers.end()
            check.status, check.detail = FAIL, f"case {label!r}: protocol: {failure}"
            return False
        except Unsupported as missing:
            check.status, check.detail = NOT_IMPLEMENTED, str(missing)
            drivers.end()
            return False
        except Mismatch as mismatch:
            check.status, check.detail = FAIL, f"case {label!r}: {mismatch}"
            drivers.end()
            return False
    check.cases += 1
    return True


def events_replay(drivers: Drivers, vectors: Path) -> Check:
    events = read_vectors(vectors, "events.json")
    check = Check("events.json")
    _run_case(drivers, check, "events", lambda pair: _play(pair, events["operations"]))
    return check


def outcome_replays(drivers: Drivers, vectors: Path) -> Check:
    check = Check("outcomes.json")
    for case in read_vectors(vectors, "outcomes.json")["outcomes"]:
        if not _run_case(drivers, check, case["name"], lambda pair, c=case: _outcome_case(pair, c)):
            break
    return check


def recovery_replays(drivers: Drivers, vectors: Path) -> Check:
    check = Check("recovery.json")
    for case in read_vectors(vectors, "recovery.json")["recoveries"]:
        run = lambda pair, c=case: _recovery_case(pair, c)  # noqa: E731
        if not _run_case(drivers, check, case["name"], run):
            break
    return check

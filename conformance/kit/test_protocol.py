"""The driver protocol's edges (SPEC.md section 18.1), outside in.

The kit's end: a driver that cannot start, speaks another version, answers with a wrong
id, a line that is not JSON, nothing at all (a timeout) or dies, fails the check that
sent the request (named *protocol*), and the next check gets a new process; one that
answers ``unsupported`` leaves its checks *not implemented*. The driver's end: the
reference driver answers every hostile line (not JSON, no args, ill-typed and
out-of-range arguments, a payload path leaving its directory) with the refusal SPEC names
and stays alive.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from runstore.errors import ImplementationUnavailableError
from runstore.identity import run_attempt_id
from runstore.kit import KitOptions
from runstore.kit import run_kit
from runstore.kit.protocol_cases import CASES
from runstore.kit.report import FAIL
from runstore.kit.report import NOT_IMPLEMENTED
from runstore.kit.report import PASS

DRIVER = [sys.executable, "-m", "runstore.kit.driver"]

FAKE = textwrap.dedent(
    """\
    import json, os, sys, time
    mode, marker = sys.argv[1], sys.argv[2]
    first_process = not os.path.exists(marker)
    open(marker, "a").close()
    for number, line in enumerate(sys.stdin):
        breaks = first_process and number == 1  # only the first process breaks, once
        if breaks and mode == "not-json":
            print("this is not json", flush=True)
            continue
        if breaks and mode == "silent":
            time.sleep(30)
            continue
        if breaks and mode == "dies":
            sys.exit(4)
        if breaks and mode in ("wrong-id", "two-kinds"):
            wrong = {"id": 1000, "result": {}}  # the line (not JSON) has no id: null is due
            both = {"id": None, "result": {}, "unsupported": "x"}
            print(json.dumps(wrong if mode == "wrong-id" else both), flush=True)
            continue
        try:
            request = json.loads(line)
        except (ValueError, RecursionError):
            request = None
        identifier = request.get("id") if isinstance(request, dict) else None
        if not isinstance(request, dict) or not isinstance(request.get("args"), dict):
            answer = {"id": identifier, "refused": {"code": "invalid_record", "message": "no"}}
        elif request["op"] == "hello":
            version = 2 if mode == "version" else 1
            hello = {"protocol": version, "implementation": "fake"}
            answer = {"id": identifier, "result": hello}
        elif mode == "accepts":  # answers every request, however malformed, with a result
            answer = {"id": identifier, "result": {}}
        else:
            answer = {"id": identifier, "unsupported": str(request["op"])}
        print(json.dumps(answer), flush=True)
    """
)


def fake(tmp_path: Path, mode: str) -> list[str]:
    script = tmp_path / "fake_driver.py"
    script.write_text(FAKE)
    return [sys.executable, str(script), mode, str(tmp_path / "started")]


VALUES = KitOptions(level="values", timeout=2.0)


def test_a_command_that_does_not_start_is_implementation_unavailable(tmp_path: Path) -> None:
    with pytest.raises(ImplementationUnavailableError, match="cannot start"):
        run_kit([str(tmp_path / "no-such-driver")], VALUES)


def test_a_driver_of_another_protocol_version_is_not_driven(tmp_path: Path) -> None:
    with pytest.raises(ImplementationUnavailableError, match="protocol 2"):
        run_kit(fake(tmp_path, "version"), VALUES)


def test_unsupported_operations_leave_their_checks_not_implemented(tmp_path: Path) -> None:
    report = run_kit(fake(tmp_path, "unsupported"), KitOptions(level="store", timeout=2.0))
    protocol, *others = report.checks
    assert {check.status for check in others} == {NOT_IMPLEMENTED}
    # The line rules hold for any driver; the cases of its unsupported operations skip.
    assert protocol.status == PASS and "skipped" in protocol.detail
    assert not report.failed
    assert report.check("canonical_json.json encode").detail == "canonical.encode is unsupported"


def test_a_driver_that_accepts_a_malformed_request_fails_the_protocol_check(
    tmp_path: Path,
) -> None:
    """The ``protocol refusals`` check can fail: a driver that answers a request whose
    ``op`` is not a string with a result, where SPEC.md 18.1 names ``invalid_record``,
    fails it at that case (the lines before it, refused as they should be, pass)."""
    report = run_kit(
        fake(tmp_path, "accepts"), KitOptions(level="values", only=("protocol refusals",))
    )
    (check,) = report.checks
    assert check.status == FAIL
    assert check.detail == (
        "case 'op not a string': expected refused invalid_record, got result {}"
    )
    assert check.cases == 4


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("wrong-id", "does not carry id"),
        ("not-json", "not JSON"),
        ("silent", "no answer within 2 s"),
        ("dies", "exited (status 4)"),
        ("two-kinds", "exactly one of result, refused, unsupported"),
    ],
)
def test_a_protocol_failure_fails_its_check_and_the_next_gets_a_new_process(
    tmp_path: Path, mode: str, words: str
) -> None:
    """The fake breaks the protocol on its second request (the first check's first case):
    that check fails naming the protocol; the next check's requests reach a new process
    (which answers them unsupported)."""
    report = run_kit(fake(tmp_path, mode), VALUES)
    first, second = report.checks[0], report.checks[1]
    assert first.status == FAIL
    assert "protocol" in first.detail and words in first.detail, first.detail
    assert second.status == NOT_IMPLEMENTED


def serve(*lines: str) -> list[dict[str, object]]:
    done = subprocess.run(
        DRIVER, input="".join(line + "\n" for line in lines), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def refused(response: dict[str, object]) -> object:
    assert set(response) == {"id", "refused"}, response
    return response["refused"]["code"]  # type: ignore[index]


def line(number: int, op: str, **args: object) -> str:
    return json.dumps({"id": number, "op": op, "args": args})


def test_the_reference_driver_refuses_hostile_lines_and_stays_alive(tmp_path: Path) -> None:
    """SPEC.md 18.1 and 18.2, beyond the kit's own ``protocol refusals`` lines (sent
    first, as the kit sends them): a malformed integer or hex argument is
    ``invalid_record``, a value the library refuses is the library's code, a store
    operation before ``open`` is ``store_closed`` and an unsafe root ``unsafe_path``, a
    payload entry that would land outside its directory (``..``, or below a symbolic
    link entry) is ``unsafe_entry`` and nothing appears outside; every line is answered
    in order, and the process answers the last ``hello`` after them all."""
    slot = "attempt-slot:v1:" + "0" * 64
    hostile = [
        (line(5, "canonical.encode", value=["int", "x1"]), 5, "invalid_record"),
        (line(6, "canonical.decode", input_hex="ZZ"), 6, "invalid_record"),
        (line(8, "attempt.id", slot_id="x", retry_index="0"), 8, "invalid_record"),
        (line(9, "attempt.id", slot_id=slot, retry_index="-1"), 9, "out_of_range"),
        (line(10, "tree.hash", entries=[{"path": "a", "type": "file"}]), 10, "invalid_record"),
        (line(11, "reserve"), 11, "store_closed"),
        (line(12, "open", root="relative/root"), 12, "unsafe_path"),
        (line(13, "open", root=5), 13, "invalid_record"),
    ]
    # The kit's own protocol-refusal lines go first: after them all, the driver still answers.
    lines = [line for _, line, _, _ in CASES]
    escape = {"path": "../escape", "type": "file", "data_hex": "", "executable": False}
    payload = json.dumps({"id": 14, "op": "payload.check", "args": {"entries": [escape]}})
    outside = tmp_path / "outside"
    outside.mkdir()
    link = {"path": "l", "type": "symlink", "target": str(outside)}
    below = {"path": "l/x", "type": "file", "data_hex": "00", "executable": False}
    through = json.dumps({"id": 17, "op": "payload.check", "args": {"entries": [link, below]}})
    lines += [line for line, _, _ in hostile] + [payload, through]
    lines += ['{"id": 15, "op": "no.such.op", "args": {}}', '{"id": 16, "op": "hello", "args": {}}']
    responses = serve(*lines)[len(CASES) :]
    assert len(responses) == len(lines) - len(CASES)
    for (_, identifier, code), response in zip(hostile, responses, strict=False):
        assert response["id"] == identifier
        assert refused(response) == code, response
    assert refused(responses[len(hostile)]) == "unsafe_entry"
    assert not (Path.cwd().parent / "escape").exists()
    assert refused(responses[len(hostile) + 1]) == "unsafe_entry"  # not written through l
    assert list(outside.iterdir()) == []
    assert responses[-2] == {"id": 15, "unsupported": "no.such.op"}
    assert responses[-1]["result"]["protocol"] == 1  # type: ignore[index]


def test_the_reference_driver_refuses_ill_typed_store_arguments(tmp_path: Path) -> None:
    """Outside in, through the protocol (the guard's ids agree, so only the named field is
    wrong): a guard whose revision is not a decimal string,
    an unknown phase, a lease whose expiry is a JSON number, an unknown authorization kind
    and a file whose executable flag is not a boolean are ``invalid_record``; a negative
    time reaches the store's own range check (``out_of_range``). The store is unchanged:
    its projection stays empty."""
    root = tmp_path / "store"
    root.mkdir()
    slot = "attempt-slot:v1:" + "0" * 64
    guard = {
        "attempt_id": run_attempt_id(slot, 0),
        "slot_id": slot,
        "retry_index": "0",
        "state": "reserved",
        "revision": "zero",
        "owner_token": "o",
        "lease_id": "l",
        "claim_lease_id": None,
    }
    lease = {"lease_id": "l", "owner_token": "o", "expires_at_ns": 5}
    requests = [
        ("open", {"root": str(root)}),
        ("advance", {"guard": guard, "phase": "executing", "now_ns": "1"}),
        ("advance", {"guard": {**guard, "revision": "0"}, "phase": "flying", "now_ns": "1"}),
        (
            "reserve",
            {
                "slot_id": guard["slot_id"],
                "authorization": {"kind": "first_attempt"},
                "lease": lease,
                "now_ns": "1",
            },
        ),
        (
            "reserve",
            {
                "slot_id": guard["slot_id"],
                "authorization": {"kind": "any"},
                "lease": {**lease, "expires_at_ns": "5"},
                "now_ns": "1",
            },
        ),
        (
            "reserve",
            {
                "slot_id": guard["slot_id"],
                "authorization": {"kind": "first_attempt"},
                "lease": {**lease, "expires_at_ns": "5"},
                "now_ns": "-1",
            },
        ),
        (
            "publish_artifact",
            {
                "guard": {**guard, "revision": "0"},
                "kind": "dataset",
                "entries": [{"path": "a", "type": "file", "data_hex": "", "executable": 1}],
                "clock": ["1"],
            },
        ),
        ("projection", {}),
    ]
    lines = [
        json.dumps({"id": n, "op": op, "args": args}) for n, (op, args) in enumerate(requests, 1)
    ]
    responses = serve(*lines)
    assert responses[0] == {"id": 1, "result": {}}
    codes = [refused(response) for response in responses[1:-1]]
    assert codes == [
        "invalid_record",
        "invalid_record",
        "invalid_record",
        "invalid_record",
        "out_of_range",
        "invalid_record",
    ]
    tables = responses[-1]["result"]["tables"]  # type: ignore[index]
    assert all(rows == [] for rows in tables.values())


def test_the_values_level_reports_pass_for_the_reference_driver() -> None:
    report = run_kit(DRIVER, VALUES)
    assert report.checks and {check.status for check in report.checks} == {PASS}

"""The check ``protocol refusals`` (SPEC.md sections 18.1 and 18.2): malformed lines and
arguments, each sent as it is, and the refusal SPEC names for it.

Rules of this file: every case is a rule of section 18 that no vector file states (the
files hold well-formed values only); each line is sent raw and must be answered with the
named code and the named id (``None`` where the line has none a driver can read). A case
that could write outside a driver's own directory is refused before anything is created,
so sending it is harmless to a conforming driver.
"""

from __future__ import annotations

import json

from .cases import Drivers
from .cases import Expect
from .cases import refused
from .client import ProtocolFailure
from .client import Reply
from .report import FAIL
from .report import Check

A_NULL = [["string", "61"], ["null"]]
FLOAT_FLAG = {"applicable": 1.0, "candidate_id": "c", "evidence": {}, "problem_id": "p"}
ESCAPE = {"path": "../escape", "type": "file", "data_hex": "", "executable": False}
LINK = {"path": "l", "type": "symlink", "target": "/tmp"}
BELOW = {"path": "l/x", "type": "file", "data_hex": "00", "executable": False}


def _file(path: str) -> dict[str, object]:
    return {"path": path, "data_hex": "", "executable": False}


def unsupported(reply: Reply) -> str | None:
    return None if reply.kind == "unsupported" else f"expected unsupported, got {reply.kind}"


def _request(number: int, op: str, **args: object) -> str:
    return json.dumps({"id": number, "op": op, "args": args})


CASES: tuple[tuple[str, str, object, Expect], ...] = (
    ("a line that is not JSON", "this is not json", None, refused("invalid_record")),
    ("a line that is an array", '["a", "list"]', None, refused("invalid_record")),
    ("no args", '{"id": 3, "op": "tree.hash"}', 3, refused("invalid_record")),
    (
        "args not an object",
        '{"id": 4, "op": "tree.hash", "args": []}',
        4,
        refused("invalid_record"),
    ),
    ("op not a string", '{"id": 5, "op": 5, "args": {}}', 5, refused("invalid_record")),
    ("an id echoed as written", '{"id": "x", "op": "no.such.op", "args": {}}', "x", unsupported),
    (
        "nested past what a driver must parse",
        '{"op": "tree.hash", "args": {"entries": ' + "[" * 5000 + "]" * 5000 + "}}",
        None,
        refused("invalid_record"),
    ),
    (
        "a description that is not a tagged array",
        _request(8, "canonical.encode", value="zz"),
        8,
        refused("invalid_record"),
    ),
    (
        "string bytes that are not UTF-8",
        _request(9, "canonical.encode", value=["string", "ff"]),
        9,
        refused("invalid_record"),
    ),
    (
        "a float literal that is not one",
        _request(10, "canonical.encode", value=["float", "abc"]),
        10,
        refused("invalid_record"),
    ),
    (
        "a code point past U+10FFFF",
        _request(11, "canonical.encode", value=["string_code_points", [0x110000]]),
        11,
        refused("invalid_record"),
    ),
    (
        "an object description that repeats a key",
        _request(12, "canonical.encode", value=["object", A_NULL, A_NULL]),
        12,
        refused("invalid_record"),
    ),
    (
        "a well-formed NaN",
        _request(13, "canonical.encode", value=["float", "NaN"]),
        13,
        refused("invalid_canonical_json"),
    ),
    (
        "an array as a key",
        _request(14, "canonical.encode", value=["object", [["array"], ["null"]]]),
        14,
        refused("invalid_canonical_json"),
    ),
    (
        "a float in a boolean field",
        _request(15, "record.identity", type="decision", fields=FLOAT_FLAG),
        15,
        refused("invalid_canonical_json"),
    ),
    (
        "attempt is not a record type",
        _request(16, "record.identity", type="attempt", fields={}),
        16,
        refused("invalid_record"),
    ),
    (
        "a retry index as a JSON number",
        _request(17, "attempt.id", slot_id="attempt-slot:v1:" + "0" * 64, retry_index=0),
        17,
        refused("invalid_record"),
    ),
    (
        "formatting a negative time",
        _request(18, "timestamp.format", ns="-1"),
        18,
        refused("out_of_range"),
    ),
    (
        "a tree whose parent directory is not listed",
        _request(19, "tree.hash", entries=[{"path": "x/y", "type": "directory"}]),
        19,
        refused("invalid_record"),
    ),
    (
        "a manifest of a path and a path below it",
        _request(20, "manifest.build", files=[_file("a"), _file("a/b")]),
        20,
        refused("unsafe_entry"),
    ),
    (
        "a manifest of a path under manifest.json",
        _request(21, "manifest.build", files=[_file("manifest.json/x")]),
        21,
        refused("unsafe_entry"),
    ),
    (
        "a payload entry leaving its directory",
        _request(22, "payload.check", entries=[ESCAPE]),
        22,
        refused("unsafe_entry"),
    ),
    (
        "a payload entry below a symbolic link entry",
        _request(23, "payload.check", entries=[LINK, BELOW]),
        23,
        refused("unsafe_entry"),
    ),
    ("an operation the driver lacks", _request(24, "no.such.op"), 24, unsupported),
)
"""Each case: its name, the line sent, the id its answer carries, and the answer."""


def protocol_check(drivers: Drivers) -> Check:
    """Send every case; the first wrong answer fails the check. A case whose operation
    the driver answers ``unsupported`` is skipped (its rule belongs to an operation the
    driver does not claim), and the detail counts the skipped."""
    check = Check("protocol refusals")
    skipped = 0
    for name, line, identifier, expect in CASES:
        try:
            reply = drivers.current().send_line(line, name, identifier)
        except ProtocolFailure as failure:
            drivers.end()
            check.status, check.detail = FAIL, f"case {name!r}: protocol: {failure}"
            return check
        if reply.kind == "unsupported" and expect is not unsupported:
            skipped += 1
            continue
        wrong = expect(reply)
        if wrong is not None:
            check.status, check.detail = FAIL, f"case {name!r}: {wrong}"
            return check
        check.cases += 1
    if skipped:
        check.detail = f"{skipped} cases skipped: the driver does not support their operations"
    return check

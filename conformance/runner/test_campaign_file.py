"""The campaign reader (runstore.runner.campaign_file), from SPEC.md section 15.1: what a
valid file becomes, and each refusal, written from the text with its key path or line."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.canonical import encode
from runstore.errors import CampaignInvalidError
from runstore.runner.campaign import Campaign
from runstore.runner.campaign import Candidate
from runstore.runner.campaign import InputFile
from runstore.runner.campaign import Problem
from runstore.runner.campaign import SlotKind
from runstore.runner.campaign_file import load_campaign
from runstore.runner.campaign_file import parse_campaign

SECOND = 10**9


class Raw:
    """A TOML value written verbatim (floats, dates): what the test writer cannot spell."""

    def __init__(self, text: str) -> None:
        self.text = text


DELETE = object()
"""An edit value that removes the key."""


def toml_string(text: str) -> str:
    escaped = "".join(
        "\\" + char
        if char in '"\\'
        else f"\\u{ord(char):04x}"
        if ord(char) < 0x20 or ord(char) == 0x7F
        else char
        for char in text
    )
    return f'"{escaped}"'


def toml_value(value: Any) -> str:
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{toml_string(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_document(document: dict[str, Any]) -> str:
    """Scalars first, then ``[table]``s and ``[[array of tables]]`` with inline values."""
    lines: list[str] = []
    tables: list[str] = []
    for key, value in document.items():
        if isinstance(value, dict):
            tables += [
                f"[{key}]",
                *(f"{toml_string(k)} = {toml_value(v)}" for k, v in value.items()),
            ]
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for item in value:
                tables += [
                    f"[[{key}]]",
                    *(f"{toml_string(k)} = {toml_value(v)}" for k, v in item.items()),
                ]
        else:
            lines.append(f"{toml_string(key)} = {toml_value(value)}")
    return "\n".join(lines + tables) + "\n"


def base() -> dict[str, Any]:
    return {
        "campaign": {"name": "demo"},
        "candidates": [{"name": "a", "command": ["{python}", "worker.py"]}],
        "problems": [{"name": "p"}],
    }


def edited(edits: list[tuple[tuple[Any, ...], Any]]) -> dict[str, Any]:
    document = base()
    for path, value in edits:
        target: Any = document
        for step in path[:-1]:
            target = target[step]
        if value is DELETE:
            del target[path[-1]]
        elif isinstance(target, list) and path[-1] == len(target):
            target.append(value)
        else:
            target[path[-1]] = value
    return document


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A campaign directory with input files, a directory, symbolic links and a file
    outside it."""
    root = tmp_path / "c"
    (root / "data").mkdir(parents=True)
    (root / "dir").mkdir()
    (root / "worker.py").write_bytes(b"print('work')\n")
    (root / "data" / "a.txt").write_bytes(b"alpha" * 100)
    (root / "link.txt").symlink_to(root / "worker.py")
    (root / "linkdir").symlink_to(root / "data")
    (tmp_path / "outside.txt").write_bytes(b"outside")
    return root


def write(folder: Path, text: str | bytes, name: str = "campaign.toml") -> Path:
    path = folder / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def refusal(path: Path) -> str:
    with pytest.raises(CampaignInvalidError) as caught:
        load_campaign(path)
    assert caught.value.code == "campaign_invalid"
    message = caught.value.message
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    return message


def digest(path: Path, name: str) -> InputFile:
    data = path.read_bytes()
    return InputFile(
        name=name, source=str(path), sha256=hashlib.sha256(data).hexdigest(), size=len(data)
    )


FULL = """\
[campaign]
name = "codecs"
slot_kind = "fresh_observation"
timeout_seconds = 60
lease_seconds = 30

[[candidates]]
name = "zlib-6"
command = ["{python}", "worker.py", "zlib", "6"]
env = { ZED = "z", PYTHONHASHSEED = "0" }
files = ["worker.py"]
applies_to = ["text", "json-1m"]
timeout_seconds = 30

[[candidates]]
name = "copy"
command = ["cp"]

[[problems]]
name = "text-1m"
files = ["data/a.txt"]
tags = ["text", "small"]

[problems.parameters]
kind = "text"
size = 1048576
seed = 1
flags = [true, false]
nested = { deep = [[1], -2] }

[[problems]]
name = "json-1m"
"""


def test_a_full_file_becomes_exactly_these_values(folder: Path) -> None:
    path = write(folder, FULL)
    assert load_campaign(path) == Campaign(
        name="codecs",
        path=str(path),
        slot_kind=SlotKind.FRESH_OBSERVATION,
        timeout_ns=60 * SECOND,
        lease_ns=30 * SECOND,
        candidates=(
            Candidate(
                name="zlib-6",
                command=("{python}", "worker.py", "zlib", "6"),
                env=(("PYTHONHASHSEED", "0"), ("ZED", "z")),
                files=(digest(folder / "worker.py", "worker.py"),),
                applies_to=("text", "json-1m"),
                timeout_ns=30 * SECOND,
            ),
            Candidate(
                name="copy", command=("cp",), env=(), files=(), applies_to=None, timeout_ns=None
            ),
        ),
        problems=(
            Problem(
                name="text-1m",
                parameters_json=encode(
                    {
                        "kind": "text",
                        "size": 1048576,
                        "seed": 1,
                        "flags": [True, False],
                        "nested": {"deep": [[1], -2]},
                    }
                ),
                files=(digest(folder / "data" / "a.txt", "data/a.txt"),),
                tags=("text", "small"),
            ),
            Problem(name="json-1m", parameters_json=b"{}", files=(), tags=()),
        ),
    )


def test_parse_campaign_reads_files_relative_to_the_given_path(folder: Path) -> None:
    parsed = parse_campaign(FULL, path=str(folder / "elsewhere.toml"))
    assert parsed.path == str(folder / "elsewhere.toml")
    assert parsed == load_campaign(write(folder, FULL, "elsewhere.toml"))


def test_a_stream_with_a_warmup(folder: Path) -> None:
    document = base()
    document["campaign"].update({"slot_kind": "stream", "checkpoints": 4, "warmup": True})
    loaded = load_campaign(write(folder, toml_document(document)))
    assert (loaded.slot_kind, loaded.checkpoints, loaded.warmup) == (SlotKind.STREAM, 4, True)


def test_defaults(folder: Path) -> None:
    loaded = load_campaign(write(folder, toml_document(base())))
    assert (loaded.slot_kind, loaded.timeout_ns, loaded.lease_ns) == (
        SlotKind.ONE_SHOT,
        600 * SECOND,
        60 * SECOND,
    )
    assert (loaded.checkpoints, loaded.warmup) == (None, False)
    assert loaded.candidates == (
        Candidate(
            name="a",
            command=("{python}", "worker.py"),
            env=(),
            files=(),
            applies_to=None,
            timeout_ns=None,
        ),
    )
    assert loaded.problems == (Problem(name="p", parameters_json=b"{}", files=(), tags=()),)
    assert loaded.problems[0].parameters == {}


def test_a_file_named_by_several_entries_is_one_value(folder: Path) -> None:
    document = edited(
        [
            (("candidates", 0, "files"), ["worker.py"]),
            (("candidates", 1), {"name": "b", "command": ["x"], "files": ["worker.py"]}),
        ]
    )
    loaded = load_campaign(write(folder, toml_document(document)))
    assert loaded.candidates[0].files == loaded.candidates[1].files


def test_the_limits_themselves_are_accepted(folder: Path) -> None:
    document = edited(
        [
            (("campaign", "timeout_seconds"), 7 * 86400),
            (("campaign", "lease_seconds"), 3),
            (("candidates", 0, "timeout_seconds"), 1),
            (("problems", 0, "parameters"), {"max": MAX_SAFE_INTEGER, "min": -MAX_SAFE_INTEGER}),
            (("problems", 0, "tags"), ["x" * 64]),
        ]
    )
    loaded = load_campaign(write(folder, toml_document(document)))
    assert (loaded.timeout_ns, loaded.lease_ns) == (7 * 86400 * SECOND, 3 * SECOND)
    assert loaded.candidates[0].timeout_ns == SECOND
    assert loaded.problems[0].parameters == {"max": MAX_SAFE_INTEGER, "min": -MAX_SAFE_INTEGER}


CAMPAIGN = ("campaign",)
CANDIDATE = ("candidates", 0)
PROBLEM = ("problems", 0)
TWO_CANDIDATES = (("candidates", 1), {"name": "a", "command": ["x"]})

REFUSALS: list[tuple[str, list[tuple[tuple[Any, ...], Any]], str, str]] = [
    # (case, edits, key path, fragment of the reason)
    ("campaign missing", [(CAMPAIGN, DELETE)], "campaign", "missing"),
    ("candidates missing", [(("candidates",), DELETE)], "candidates", "missing"),
    ("problems missing", [(("problems",), DELETE)], "problems", "missing"),
    ("no candidates", [(("candidates",), [])], "candidates", "at least one candidate"),
    ("no problems", [(("problems",), [])], "problems", "at least one problem"),
    ("candidates a table", [(("candidates",), {"name": "a"})], "candidates", "array of tables"),
    ("campaign not a table", [(CAMPAIGN, 1)], "campaign", "must be a table"),
    ("unknown top key", [(("colour",), 1)], "colour", "unknown key"),
    ("unknown campaign key", [((*CAMPAIGN, "colour"), 1)], "campaign.colour", "unknown key"),
    ("unknown quoted key", [((*CAMPAIGN, "a b"), 1)], 'campaign."a b"', "unknown key"),
    ("unknown candidate key", [((*CANDIDATE, "colour"), 1)], "candidates[0].colour", "unknown"),
    ("unknown problem key", [((*PROBLEM, "colour"), 1)], "problems[0].colour", "unknown key"),
    ("campaign.name missing", [((*CAMPAIGN, "name"), DELETE)], "campaign.name", "missing"),
    ("candidate name missing", [((*CANDIDATE, "name"), DELETE)], "candidates[0].name", "missing"),
    ("problem name missing", [((*PROBLEM, "name"), DELETE)], "problems[0].name", "missing"),
    ("name with a space", [((*CAMPAIGN, "name"), "a b")], "campaign.name", "1 to 64 characters"),
    ("name starting with -", [((*CANDIDATE, "name"), "-a")], "candidates[0].name", "starting"),
    ("name of 65", [((*PROBLEM, "name"), "p" * 65)], "problems[0].name", "1 to 64 characters"),
    ("empty name", [((*PROBLEM, "name"), "")], "problems[0].name", "1 to 64 characters"),
    ("name not a string", [((*CAMPAIGN, "name"), 5)], "campaign.name", "got integer"),
    ("duplicate candidate", [TWO_CANDIDATES], "candidates[1].name", "duplicate 'a'"),
    ("duplicate problem", [(("problems", 1), {"name": "p"})], "problems[1].name", "duplicate"),
    ("command missing", [((*CANDIDATE, "command"), DELETE)], "candidates[0].command", "missing"),
    (
        "command a string",
        [((*CANDIDATE, "command"), "x")],
        "candidates[0].command",
        "nonempty list",
    ),
    ("command empty", [((*CANDIDATE, "command"), [])], "candidates[0].command", "nonempty list"),
    (
        "command element int",
        [((*CANDIDATE, "command"), ["x", 1])],
        "candidates[0].command[1]",
        "string",
    ),
    (
        "command element empty",
        [((*CANDIDATE, "command"), [""])],
        "candidates[0].command[0]",
        "nonempty",
    ),
    ("command NUL", [((*CANDIDATE, "command"), ["a\x00"])], "candidates[0].command[0]", "control"),
    (
        "command too long",
        [((*CANDIDATE, "command"), ["a" * 257])],
        "candidates[0].command[0]",
        "256",
    ),
    (
        "command placeholder typo",
        [((*CANDIDATE, "command"), ["{pyhton}", "w.py"])],
        "candidates[0].command",
        "unknown placeholder {pyhton} in argument 0",
    ),
    (
        "command lone brace",
        [((*CANDIDATE, "command"), ["x", "-c", "print({})"])],
        "candidates[0].command",
        "unknown placeholder {} in argument 2",
    ),
    ("env not a table", [((*CANDIDATE, "env"), "A=1")], "candidates[0].env", "table"),
    ("env name digit", [((*CANDIDATE, "env"), {"1A": "x"})], "candidates[0].env.1A", "[A-Za-z_]"),
    ("env name dash", [((*CANDIDATE, "env"), {"A-B": "x"})], "candidates[0].env.A-B", "[A-Za-z_]"),
    (
        "env RUNSTORE_",
        [((*CANDIDATE, "env"), {"RUNSTORE_X": "1"})],
        "candidates[0].env.RUNSTORE_X",
        "reserved",
    ),
    ("env value int", [((*CANDIDATE, "env"), {"A": 1})], "candidates[0].env.A", "must be a string"),
    ("env value NUL", [((*CANDIDATE, "env"), {"A": "\x00"})], "candidates[0].env.A", "control"),
    (
        "inf parameter",
        [((*PROBLEM, "parameters"), {"x": Raw("inf")})],
        "problems[0].parameters.x",
        "inf is not a finite number",
    ),
    (
        "nested nan",
        [((*PROBLEM, "parameters"), {"a": {"b": [1, Raw("-nan")]}})],
        "problems[0].parameters.a.b[1]",
        "-nan is not a finite number",
    ),
    (
        "datetime parameter",
        [((*PROBLEM, "parameters"), {"t": Raw("1979-05-27T07:32:00Z")})],
        "problems[0].parameters.t",
        "dates and times",
    ),
    (
        "date parameter",
        [((*PROBLEM, "parameters"), {"t": [Raw("1979-05-27")]})],
        "problems[0].parameters.t[0]",
        "dates and times",
    ),
    (
        "time parameter",
        [((*PROBLEM, "parameters"), {"t": Raw("07:32:00")})],
        "problems[0].parameters.t",
        "dates and times",
    ),
    (
        "integer 2**53",
        [((*PROBLEM, "parameters"), {"n": 2**53})],
        "problems[0].parameters.n",
        "2**53-1",
    ),
    (
        "integer -(2**53)",
        [((*PROBLEM, "parameters"), {"n": {"m": -(2**53)}})],
        "problems[0].parameters.n.m",
        "2**53-1",
    ),
    (
        "parameters not a table",
        [((*PROBLEM, "parameters"), [1])],
        "problems[0].parameters",
        "table",
    ),
    (
        "timeout 0",
        [((*CAMPAIGN, "timeout_seconds"), 0)],
        "campaign.timeout_seconds",
        "between 1 and 604800",
    ),
    (
        "timeout negative",
        [((*CAMPAIGN, "timeout_seconds"), -5)],
        "campaign.timeout_seconds",
        "between",
    ),
    (
        "timeout float",
        [((*CAMPAIGN, "timeout_seconds"), Raw("1.5"))],
        "campaign.timeout_seconds",
        "got float",
    ),
    (
        "timeout string",
        [((*CAMPAIGN, "timeout_seconds"), "60")],
        "campaign.timeout_seconds",
        "got string",
    ),
    (
        "timeout bool",
        [((*CAMPAIGN, "timeout_seconds"), True)],
        "campaign.timeout_seconds",
        "got boolean",
    ),
    (
        "timeout 7 days + 1",
        [((*CAMPAIGN, "timeout_seconds"), 604801)],
        "campaign.timeout_seconds",
        "604800",
    ),
    (
        "candidate timeout 0",
        [((*CANDIDATE, "timeout_seconds"), 0)],
        "candidates[0].timeout_seconds",
        "between",
    ),
    (
        "candidate timeout float",
        [((*CANDIDATE, "timeout_seconds"), Raw("30.0"))],
        "candidates[0].timeout_seconds",
        "float",
    ),
    (
        "lease 2",
        [((*CAMPAIGN, "lease_seconds"), 2)],
        "campaign.lease_seconds",
        "between 3 and 3600",
    ),
    (
        "lease 3601",
        [((*CAMPAIGN, "lease_seconds"), 3601)],
        "campaign.lease_seconds",
        "between 3 and 3600",
    ),
    (
        "lease float",
        [((*CAMPAIGN, "lease_seconds"), Raw("30.0"))],
        "campaign.lease_seconds",
        "float",
    ),
    ("slot kind", [((*CAMPAIGN, "slot_kind"), "streams")], "campaign.slot_kind", "one_shot"),
    (
        "stream without checkpoints",
        [((*CAMPAIGN, "slot_kind"), "stream")],
        "campaign.checkpoints",
        "missing",
    ),
    (
        "checkpoints without a stream",
        [((*CAMPAIGN, "checkpoints"), 3)],
        "campaign.checkpoints",
        "only a stream",
    ),
    (
        "zero checkpoints",
        [((*CAMPAIGN, "slot_kind"), "stream"), ((*CAMPAIGN, "checkpoints"), 0)],
        "campaign.checkpoints",
        "from 1 to 1000",
    ),
    (
        "too many checkpoints",
        [((*CAMPAIGN, "slot_kind"), "stream"), ((*CAMPAIGN, "checkpoints"), 1001)],
        "campaign.checkpoints",
        "from 1 to 1000",
    ),
    (
        "checkpoints not an integer",
        [((*CAMPAIGN, "slot_kind"), "stream"), ((*CAMPAIGN, "checkpoints"), "3")],
        "campaign.checkpoints",
        "from 1 to 1000",
    ),
    ("warmup not a bool", [((*CAMPAIGN, "warmup"), 1)], "campaign.warmup", "true or false"),
    ("tags not a list", [((*PROBLEM, "tags"), "text")], "problems[0].tags", "list of names"),
    ("tag with a space", [((*PROBLEM, "tags"), ["a b"])], "problems[0].tags[0]", "1 to 64"),
    ("tag twice", [((*PROBLEM, "tags"), ["t", "t"])], "problems[0].tags[1]", "listed twice"),
    (
        "applies_to typo",
        [((*CANDIDATE, "applies_to"), ["q"])],
        "candidates[0].applies_to[0]",
        "names no problem or tag",
    ),
    (
        "applies_to empty",
        [((*CANDIDATE, "applies_to"), [])],
        "candidates[0].applies_to",
        "nonempty",
    ),
    ("files not a list", [((*CANDIDATE, "files"), "worker.py")], "candidates[0].files", "list"),
    (
        "files absolute",
        [((*CANDIDATE, "files"), ["/etc/hostname"])],
        "candidates[0].files[0]",
        "absolute",
    ),
    (
        "files ..",
        [((*CANDIDATE, "files"), ["../outside.txt"])],
        "candidates[0].files[0]",
        "normalized",
    ),
    (
        "files inner ..",
        [((*PROBLEM, "files"), ["data/../worker.py"])],
        "problems[0].files[0]",
        "normalized",
    ),
    ("files .", [((*CANDIDATE, "files"), ["./worker.py"])], "candidates[0].files[0]", "normalized"),
    (
        "files //",
        [((*CANDIDATE, "files"), ["data//a.txt"])],
        "candidates[0].files[0]",
        "normalized",
    ),
    ("files empty", [((*CANDIDATE, "files"), [""])], "candidates[0].files[0]", "normalized"),
    (
        "files backslash",
        [((*CANDIDATE, "files"), ["data\\a.txt"])],
        "candidates[0].files[0]",
        "normalized",
    ),
    ("files control", [((*CANDIDATE, "files"), ["a\x01"])], "candidates[0].files[0]", "normalized"),
    (
        "files missing",
        [((*CANDIDATE, "files"), ["nothing.py"])],
        "candidates[0].files[0]",
        "nothing.py: No such file",
    ),
    (
        "files a directory",
        [((*CANDIDATE, "files"), ["dir"])],
        "candidates[0].files[0]",
        "not a regular file",
    ),
    (
        "files a symlink",
        [((*CANDIDATE, "files"), ["link.txt"])],
        "candidates[0].files[0]",
        "symbolic link",
    ),
    (
        "files via a symlink",
        [((*PROBLEM, "files"), ["linkdir/a.txt"])],
        "problems[0].files[0]",
        "symbolic link",
    ),
    (
        "files below a file",
        [((*PROBLEM, "files"), ["worker.py/a"])],
        "problems[0].files[0]",
        "not a directory",
    ),
    (
        "files twice",
        [((*PROBLEM, "files"), ["worker.py", "worker.py"])],
        "problems[0].files[1]",
        "listed twice",
    ),
    (
        "files clash",
        [
            ((*CANDIDATE, "files"), ["worker.py"]),
            ((*PROBLEM, "files"), ["data/a.txt", "worker.py"]),
        ],
        "problems[0].files[1]",
        "also a candidate's file",
    ),
]


@pytest.mark.parametrize(
    ("edits", "key", "fragment"),
    [case[1:] for case in REFUSALS],
    ids=[case[0] for case in REFUSALS],
)
def test_refusals_name_the_key_path(
    folder: Path, edits: list[tuple[tuple[Any, ...], Any]], key: str, fragment: str
) -> None:
    path = write(folder, toml_document(edited(edits)))
    message = refusal(path)
    assert message.startswith(f"{path}: {key}: "), message
    assert fragment in message


def test_more_than_10000_pairs_is_refused(folder: Path) -> None:
    document = base()
    document["candidates"] = [{"name": f"c{i}", "command": ["x"]} for i in range(101)]
    document["problems"] = [{"name": f"p{i}"} for i in range(100)]
    path = write(folder, toml_document(document))
    assert refusal(path) == f"{path}: candidates: 10100 candidate x problem pairs, more than 10000"
    document["candidates"] = document["candidates"][:100]
    assert len(load_campaign(write(folder, toml_document(document))).candidates) == 100


def test_a_file_over_64_mib_is_refused(folder: Path) -> None:
    with (folder / "big.bin").open("wb") as big:
        big.truncate(64 * 2**20 + 1)
    path = write(folder, toml_document(edited([((*PROBLEM, "files"), ["big.bin"])])))
    assert "problems[0].files[0]: " in refusal(path)
    assert "64 MiB" in refusal(path)


@pytest.mark.parametrize(
    ("text", "position", "reason"),
    [
        ('[campaign]\nname = "x"\ntimeout_seconds = \n', "line 3, column 19", "Invalid value"),
        ('[campaign]\nname = "x"\nname = "y"\n', "line 3, column 11", "Cannot overwrite a value"),
        ('[campaign]\nname = "x', "line 2, column 10", "Unterminated string"),
    ],
    ids=["invalid value", "duplicate key", "end of document"],
)
def test_syntax_errors_name_the_line_and_column(
    folder: Path, text: str, position: str, reason: str
) -> None:
    path = write(folder, text)
    assert refusal(path) == f"{path}: {position}: {reason}"


def test_unusable_toml_is_refused(folder: Path) -> None:
    assert "nest too deeply" in refusal(write(folder, "a = " + "[" * 100_000))
    assert "not usable TOML" in refusal(write(folder, "a = " + "9" * 5000))


def test_a_relative_campaign_path_is_made_absolute(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(folder, FULL)
    monkeypatch.chdir(folder)
    loaded = load_campaign("campaign.toml")
    assert loaded.path == str(folder / "campaign.toml")
    assert loaded.candidates[0].files == (digest(folder / "worker.py", "worker.py"),)


def test_a_missing_file_is_refused(folder: Path) -> None:
    assert "cannot read: No such file" in refusal(folder / "absent.toml")


def test_a_directory_is_refused(folder: Path) -> None:
    assert "cannot read" in refusal(folder / "dir")


def test_a_non_utf8_file_is_refused(folder: Path) -> None:
    path = write(folder, b'[campaign]\nname = "\xff"\n')
    assert refusal(path) == f"{path}: not UTF-8 (byte 19)"


def test_parse_campaign_refuses_non_strings() -> None:
    with pytest.raises(CampaignInvalidError):
        parse_campaign(b"[campaign]", path="/x.toml")  # type: ignore[arg-type]


# --- parameters: any TOML value of the allowed kinds round-trips to canonical JSON ------

_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=8)
_LEAVES = st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER) | st.booleans() | _TEXT
_VALUES = st.recursive(
    _LEAVES,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_TEXT, children, max_size=4),
    max_leaves=12,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(parameters=st.dictionaries(_TEXT, _VALUES, max_size=5))
def test_parameters_round_trip_to_canonical_json(folder: Path, parameters: dict[str, Any]) -> None:
    document = edited([((*PROBLEM, "parameters"), parameters)])
    loaded = parse_campaign(toml_document(document), path=str(folder / "campaign.toml"))
    assert loaded.problems[0].parameters_json == encode(parameters)
    assert loaded.problems[0].parameters == parameters

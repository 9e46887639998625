"""Reading a campaign file (SPEC.md section 15.1) into a validated :class:`Campaign`.

Rules of this file: this module owns the TOML format of campaigns and every refusal of one;
it reads the campaign file and the input files it names (to digest them) and nothing else,
and it never touches a store. Every refusal is :class:`CampaignInvalidError` with a one-line
message starting with the file's path, then the line and column (TOML syntax) or the key
path (``candidates[2].command: ...``). Inside, a refusal travels as :class:`_Refusal` so the
small checks below need not know the path.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import tomllib
from collections.abc import Callable
from typing import Final
from typing import NoReturn

import attrs
from runstore.canonical import JSON
from runstore.canonical import MAX_DEPTH
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.canonical import encode
from runstore.errors import CampaignInvalidError
from runstore.errors import InvalidCanonicalJsonError
from runstore.errors import InvalidRecordError
from runstore.runner.campaign import Campaign
from runstore.runner.campaign import Candidate
from runstore.runner.campaign import InputFile
from runstore.runner.campaign import Problem
from runstore.runner.campaign import SlotKind
from runstore.runner.executor import PLACEHOLDERS
from runstore.runner.executor import expand_command
from runstore.validation import MAX_NAME_LENGTH
from runstore.validation import check_store_path
from runstore.validation import is_control

MAX_PAIRS: Final = 10_000
"""Most candidate x problem pairs one campaign may have."""

MAX_FILE_SIZE: Final = 64 * 2**20
"""Largest input file, in bytes."""

MAX_TIMEOUT_SECONDS: Final = 7 * 86_400
DEFAULT_TIMEOUT_SECONDS: Final = 600
MIN_LEASE_SECONDS: Final = 3
MAX_LEASE_SECONDS: Final = 3_600
DEFAULT_LEASE_SECONDS: Final = 60

_NAME = re.compile("[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_NAME_RULE = "1 to 64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit"
_ENV_NAME = re.compile("[A-Za-z_][A-Za-z0-9_]*")
_BARE_KEY = re.compile("[A-Za-z0-9_-]+")
_TOML_POSITION = re.compile(r"(.*) \(at line (\d+), column (\d+)\)", re.DOTALL)
_NS_PER_SECOND: Final = 10**9

_TOP_KEYS = frozenset({"campaign", "candidates", "problems"})
_CAMPAIGN_KEYS = frozenset(
    {"name", "slot_kind", "checkpoints", "warmup", "timeout_seconds", "lease_seconds"}
)
MAX_CHECKPOINTS = 1000
_CANDIDATE_KEYS = frozenset({"name", "command", "env", "files", "applies_to", "timeout_seconds"})
_PROBLEM_KEYS = frozenset({"name", "parameters", "files", "tags"})
_KIND_NAMES = {"bool": "boolean", "int": "integer", "str": "string", "_Float": "float"}
_KIND_NAMES |= {"list": "array", "dict": "table"}


class _Refusal(Exception):
    """A refusal at ``key`` (a key path), turned into :class:`CampaignInvalidError` by
    :func:`parse_campaign`, which knows the file's path."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


@attrs.frozen
class _Float:
    """A TOML float, kept as its literal so the refusal can quote what was written."""

    literal: str


def _refuse(key: str, reason: str) -> NoReturn:
    raise _Refusal(key, reason)


def load_campaign(path: str | os.PathLike[str]) -> Campaign:
    """Read the campaign file at ``path`` (UTF-8 TOML) and validate it, digesting every
    input file it names. Refuses with ``campaign_invalid``: a file that is missing,
    unreadable or not UTF-8, and everything :func:`parse_campaign` refuses."""
    absolute = os.path.abspath(os.fspath(path))
    try:
        with open(absolute, "rb") as file:
            data = file.read()
    except OSError as error:
        raise CampaignInvalidError(f"{absolute}: cannot read: {error.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CampaignInvalidError(f"{absolute}: not UTF-8 (byte {error.start})") from None
    return parse_campaign(text, path=absolute)


def parse_campaign(text: str, *, path: str) -> Campaign:
    """Validate campaign ``text`` read from ``path`` (an absolute path: messages start with
    it and relative ``files`` entries are read from its directory).

    Refuses with ``campaign_invalid``: TOML syntax errors (naming the line and column);
    unknown or missing keys, values of the wrong type or out of range, names breaking the
    name rule, duplicate candidate or problem names, floats, dates and out-of-range integers
    in parameters, ``applies_to`` entries naming no problem or tag, file names that are not
    normalized relative paths of regular files (not symbolic links) inside the directory,
    larger than 64 MiB or used by both a candidate and a problem, no candidate, no problem,
    or more than 10,000 candidate x problem pairs (each naming the key path).
    """
    if type(text) is not str or type(path) is not str:
        raise CampaignInvalidError("parse_campaign takes the text and the path as strings")
    document = _toml(text, path)
    try:
        return _campaign(document, path)
    except _Refusal as refusal:
        raise CampaignInvalidError(f"{path}: {refusal.key}: {refusal.reason}") from None


def _toml(text: str, path: str) -> dict[str, object]:
    try:
        return tomllib.loads(text, parse_float=_Float)
    except tomllib.TOMLDecodeError as error:
        raise CampaignInvalidError(f"{path}: {_syntax_message(str(error), text)}") from None
    except ValueError as error:  # an integer literal too long for int()
        raise CampaignInvalidError(f"{path}: not usable TOML: {error}") from None
    except RecursionError:
        raise CampaignInvalidError(f"{path}: arrays or tables nest too deeply") from None


def _syntax_message(message: str, text: str) -> str:
    """``line L, column C: <message>`` from tomllib's ``<message> (at line L, column C)``
    (Python 3.11's TOMLDecodeError has no position attributes)."""
    found = _TOML_POSITION.fullmatch(message)
    if found is not None:
        return f"line {found[2]}, column {found[3]}: {found[1]}"
    reason = message.removesuffix(" (at end of document)")
    lines = text.split("\n")
    return f"line {len(lines)}, column {len(lines[-1]) + 1}: {reason}"


def _campaign(document: dict[str, object], path: str) -> Campaign:
    top = _table(document, "", _TOP_KEYS, required=_TOP_KEYS)
    settings = _table(top["campaign"], "campaign", _CAMPAIGN_KEYS, required={"name"})
    name = _name(settings["name"], "campaign.name")
    slot_kind = _slot_kind(settings.get("slot_kind", SlotKind.ONE_SHOT.value))
    checkpoints = _checkpoints(settings.get("checkpoints"), slot_kind)
    warmup = settings.get("warmup", False)
    if type(warmup) is not bool:
        _refuse("campaign.warmup", f"must be true or false, got {_kind(warmup)}")
    timeout_ns = _timeout_ns(settings.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS), "campaign")
    lease = settings.get("lease_seconds", DEFAULT_LEASE_SECONDS)
    lease_ns = _seconds_ns(lease, "campaign.lease_seconds", MIN_LEASE_SECONDS, MAX_LEASE_SECONDS)
    candidates, problems = _entries(top, os.path.dirname(os.path.abspath(path)))
    return Campaign(
        name=name,
        path=path,
        slot_kind=slot_kind,
        timeout_ns=timeout_ns,
        lease_ns=lease_ns,
        candidates=candidates,
        problems=problems,
        checkpoints=checkpoints,
        warmup=warmup,
    )


def _checkpoints(value: object, slot_kind: SlotKind) -> int | None:
    """A stream's number of checkpoint slots (required for a stream, refused otherwise)."""
    key = "campaign.checkpoints"
    if slot_kind is not SlotKind.STREAM:
        if value is not None:
            _refuse(key, 'only a stream (slot_kind = "stream") has checkpoints')
        return None
    if value is None:
        _refuse(key, "missing (a stream needs its number of checkpoints)")
    if type(value) is not int or not 1 <= value <= MAX_CHECKPOINTS:
        _refuse(key, f"must be an integer from 1 to {MAX_CHECKPOINTS}, got {value!r:.80}")
    return value


def _entries(
    top: dict[str, object], base: str
) -> tuple[tuple[Candidate, ...], tuple[Problem, ...]]:
    """The candidates and problems, checked against each other (problems first, since
    ``applies_to`` names them)."""
    candidate_tables = _array_of_tables(top["candidates"], "candidates", "candidate")
    problem_tables = _array_of_tables(top["problems"], "problems", "problem")
    pairs = len(candidate_tables) * len(problem_tables)
    if pairs > MAX_PAIRS:
        _refuse("candidates", f"{pairs} candidate x problem pairs, more than {MAX_PAIRS}")
    digests = _Digests(base)
    problems = tuple(_problem(table, f"problems[{i}]", digests) for i, table in problem_tables)
    _check_unique([p.name for p in problems], "problems", "name")
    known = {problem.name for problem in problems}.union(*(p.tags for p in problems))
    candidates = tuple(
        _candidate(table, f"candidates[{i}]", digests, known) for i, table in candidate_tables
    )
    _check_unique([c.name for c in candidates], "candidates", "name")
    _check_file_names(candidates, problems)
    return candidates, problems


def _candidate(value: object, key: str, digests: _Digests, known: set[str]) -> Candidate:
    table = _table(value, key, _CANDIDATE_KEYS, required={"name", "command"})
    name = _name(table["name"], f"{key}.name")
    command = _command(table["command"], f"{key}.command")
    env = _env(table.get("env", {}), f"{key}.env")
    applies_to = None
    if "applies_to" in table:
        applies_to = _names(table["applies_to"], f"{key}.applies_to", nonempty=True)
        for index, target in enumerate(applies_to):
            if target not in known:
                _refuse(f"{key}.applies_to[{index}]", f"{target!r} names no problem or tag")
    timeout = table.get("timeout_seconds")
    return Candidate(
        name=name,
        command=command,
        env=env,
        files=digests.files(table.get("files", []), f"{key}.files"),
        applies_to=applies_to,
        timeout_ns=None if timeout is None else _timeout_ns(timeout, key),
    )


def _problem(value: object, key: str, digests: _Digests) -> Problem:
    table = _table(value, key, _PROBLEM_KEYS, required={"name"})
    return Problem(
        name=_name(table["name"], f"{key}.name"),
        parameters_json=_parameters(table.get("parameters", {}), f"{key}.parameters"),
        files=digests.files(table.get("files", []), f"{key}.files"),
        tags=_names(table.get("tags", []), f"{key}.tags"),
    )


# --- shapes -----------------------------------------------------------------------------


def _kind(value: object) -> str:
    """The TOML name of a value's type, for messages (datetime, date and time as is)."""
    name = type(value).__name__
    return _KIND_NAMES.get(name, name)


def _child(key: str, name: str) -> str:
    """The key path of ``name`` inside ``key``, quoting a name that is not a bare key."""
    shown = name if _BARE_KEY.fullmatch(name) else json.dumps(name)
    return f"{key}.{shown}" if key else shown


def _table(
    value: object, key: str, allowed: frozenset[str], *, required: set[str] | frozenset[str]
) -> dict[str, object]:
    if not isinstance(value, dict):
        _refuse(key, f"must be a table, got {_kind(value)}")
    for name in value:
        if name not in allowed:
            _refuse(_child(key, name), "unknown key")
    for name in sorted(required):
        if name not in value:
            _refuse(_child(key, name), "missing")
    return value


def _array_of_tables(value: object, key: str, what: str) -> list[tuple[int, object]]:
    if not isinstance(value, list):
        _refuse(key, f"must be an array of tables ([[{key}]]), got {_kind(value)}")
    if not value:
        _refuse(key, f"at least one {what} is required")
    return list(enumerate(value))


def _check_unique(names: list[str], key: str, field: str) -> None:
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        if name in seen:
            _refuse(f"{key}[{index}].{field}", f"duplicate {name!r} (also {key}[{seen[name]}])")
        seen[name] = index


# --- strings and names ------------------------------------------------------------------


def _name(value: object, key: str) -> str:
    if not isinstance(value, str):
        _refuse(key, f"must be a string, got {_kind(value)}")
    if _NAME.fullmatch(value) is None:
        _refuse(key, f"must be {_NAME_RULE}, got {value!r:.80}")
    return value


def _names(value: object, key: str, *, nonempty: bool = False) -> tuple[str, ...]:
    if not isinstance(value, list) or (nonempty and not value):
        wanted = "a nonempty list" if nonempty else "a list"
        _refuse(key, f"must be {wanted} of names, got {_kind(value)}")
    names = [_name(item, f"{key}[{index}]") for index, item in enumerate(value)]
    for index, name in enumerate(names):
        if name in names[:index]:
            _refuse(f"{key}[{index}]", f"{name!r} is listed twice")
    return tuple(names)


def _plain(value: object, key: str) -> str:
    """A plain string (SPEC.md section 4): nonempty, at most 256 code points, no control
    character; tomllib never yields a lone surrogate."""
    if not isinstance(value, str):
        _refuse(key, f"must be a string, got {_kind(value)}")
    if not value:
        _refuse(key, "must be nonempty")
    if len(value) > MAX_NAME_LENGTH:
        _refuse(key, f"is longer than {MAX_NAME_LENGTH} characters")
    if any(is_control(char) for char in value):
        _refuse(key, "contains a control character")
    return value


def _command(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        _refuse(key, f"must be a nonempty list of strings, got {_kind(value)}")
    command = tuple(_plain(item, f"{key}[{index}]") for index, item in enumerate(value))
    try:
        expand_command(command, dict.fromkeys(PLACEHOLDERS, ""))
    except ValueError as error:
        known = ", ".join(f"{{{name}}}" for name in PLACEHOLDERS)
        _refuse(key, f"{error} (placeholders: {known}; write {{{{ and }}}} for braces)")
    return command


def _env(value: object, key: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        _refuse(key, f"must be a table of strings, got {_kind(value)}")
    pairs: list[tuple[str, str]] = []
    for name, item in value.items():
        where = _child(key, name)
        if _ENV_NAME.fullmatch(name) is None or len(name) > MAX_NAME_LENGTH:
            _refuse(where, "environment names match [A-Za-z_][A-Za-z0-9_]* (256 at most)")
        if name.startswith("RUNSTORE_"):
            _refuse(where, "names starting with RUNSTORE_ are reserved for the runner")
        pairs.append((name, _plain(item, where)))
    return tuple(sorted(pairs))


def _slot_kind(value: object) -> SlotKind:
    kinds = [kind.value for kind in SlotKind]
    if not isinstance(value, str) or value not in kinds:
        _refuse("campaign.slot_kind", f"must be one of {', '.join(kinds)}, got {value!r:.80}")
    return SlotKind(value)


def _timeout_ns(value: object, key: str) -> int:
    return _seconds_ns(value, f"{key}.timeout_seconds", 1, MAX_TIMEOUT_SECONDS)


def _seconds_ns(value: object, key: str, low: int, high: int) -> int:
    if type(value) is not int:
        _refuse(key, f"must be a whole number of seconds (an integer), got {_kind(value)}")
    if not low <= value <= high:
        _refuse(key, f"must be between {low} and {high} seconds, got {value}")
    return value * _NS_PER_SECOND


# --- parameters -------------------------------------------------------------------------


def _parameters(value: object, key: str) -> bytes:
    if not isinstance(value, dict):
        _refuse(key, f"must be a table, got {_kind(value)}")
    converted = _json(value, key, 1)
    try:
        return encode(converted)
    except InvalidCanonicalJsonError as error:  # what _json let through; kept as a net
        _refuse(key, f"not canonical JSON: {error.message}")


def _json(value: object, key: str, depth: int) -> JSON:
    """The canonical JSON value of a TOML parameter value (``depth`` counts containers)."""
    if isinstance(value, (bool, str)):
        return value
    if type(value) is int:
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            _refuse(key, "integers beyond +/-(2**53-1) are not allowed (write it as a string)")
        return value
    if isinstance(value, (list, dict)) and depth > MAX_DEPTH:
        _refuse(key, f"arrays and tables nest deeper than {MAX_DEPTH}")
    if isinstance(value, list):
        return [_json(item, f"{key}[{index}]", depth + 1) for index, item in enumerate(value)]
    if isinstance(value, dict):
        return {name: _json(item, _child(key, name), depth + 1) for name, item in value.items()}
    if isinstance(value, _Float):
        _refuse(key, f'floats are not allowed (write "{value.literal}" as a string)')
    _refuse(key, f"{_kind(value)}s are not allowed (dates and times must be written as strings)")


# --- input files ------------------------------------------------------------------------


class _Digests:
    """Reads and digests input files under ``base``, each name once per campaign."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.known: dict[str, InputFile] = {}

    def files(self, value: object, key: str) -> tuple[InputFile, ...]:
        if not isinstance(value, list):
            _refuse(key, f"must be a list of relative paths, got {_kind(value)}")
        names = [_relative_path(item, f"{key}[{index}]") for index, item in enumerate(value)]
        for index, name in enumerate(names):
            if name in names[:index]:
                _refuse(f"{key}[{index}]", f"{name!r} is listed twice")
            if name not in self.known:
                self.known[name] = _input_file(self.base, name, f"{key}[{index}]")
        return tuple(self.known[name] for name in names)


def _relative_path(value: object, key: str) -> str:
    if not isinstance(value, str):
        _refuse(key, f"must be a string, got {_kind(value)}")
    if value.startswith("/"):
        _refuse(key, f"{value!r:.80} is absolute; name files relative to the campaign file")
    try:
        return check_store_path(value, "path")
    except InvalidRecordError:
        _refuse(key, f"{value!r:.80} is not a normalized relative POSIX path")


def _input_file(base: str, name: str, key: str) -> InputFile:
    """Digest ``base/name``, refusing it unless every step below ``base`` is a real
    directory and the last a regular file (never a symbolic link, so it stays inside)."""
    parts = name.split("/")
    current = base
    for part in parts[:-1]:
        current = os.path.join(current, part)
        _check_mode(current, key, stat.S_ISDIR, "is not a directory")
    source = os.path.join(current, parts[-1])
    _check_mode(source, key, stat.S_ISREG, "is not a regular file")
    try:
        sha256, size = _digest(source, key)
    except OSError as error:
        _refuse(key, f"{source}: cannot read: {error.strerror}")
    return InputFile(name=name, source=source, sha256=sha256, size=size)


def _check_mode(path: str, key: str, wanted: Callable[[int], bool], problem: str) -> None:
    try:
        mode = os.lstat(path).st_mode
    except OSError as error:
        _refuse(key, f"{path}: {error.strerror}")
    if stat.S_ISLNK(mode):
        _refuse(key, f"{path}: is a symbolic link (not followed)")
    if not wanted(mode):
        _refuse(key, f"{path}: {problem}")


def _digest(source: str, key: str) -> tuple[str, int]:
    # O_NOFOLLOW and the fstat close the gap between the lstat above and this open.
    descriptor = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            _refuse(key, f"{source}: is not a regular file")
        digest = hashlib.sha256()
        size = 0
        while chunk := file.read(2**20):
            size += len(chunk)
            if size > MAX_FILE_SIZE:
                _refuse(key, f"{source}: larger than {MAX_FILE_SIZE} bytes (64 MiB)")
            digest.update(chunk)
    return digest.hexdigest(), size


def _check_file_names(candidates: tuple[Candidate, ...], problems: tuple[Problem, ...]) -> None:
    """A worker's directory holds its candidate's and its problem's files side by side, so
    no name may belong to both (checked over all candidates and problems, not per pair)."""
    candidate_names = {file.name for candidate in candidates for file in candidate.files}
    for index, problem in enumerate(problems):
        for position, file in enumerate(problem.files):
            if file.name in candidate_names:
                _refuse(
                    f"problems[{index}].files[{position}]",
                    f"{file.name!r} is also a candidate's file",
                )

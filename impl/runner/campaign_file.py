"""Reading a campaign file (SPEC.md section 15.1) into a validated :class:`Campaign`.

Rules of this file: this module owns the TOML format of campaigns and every refusal of one;
it reads the campaign file and the input files it names (to digest them) and nothing else,
and it never touches a store. Every refusal is :class:`CampaignInvalidError` with a one-line
message starting with the file's path, then the line and column (TOML syntax) or the key
path (``candidates[2].command: ...``). Inside, a refusal travels as
:class:`~runstore.runner.campaign_checks.Refusal` so the small checks need not know the path;
parameter values and grids are :mod:`runstore.runner.campaign_values`'s.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tomllib
from collections.abc import Callable
from typing import Final
from typing import TypeVar

from runstore.canonical import JSON
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.errors import CampaignInvalidError
from runstore.errors import InvalidRecordError
from runstore.runner import campaign_checks as checks
from runstore.runner import campaign_values
from runstore.runner.campaign import Campaign
from runstore.runner.campaign import Candidate
from runstore.runner.campaign import InputFile
from runstore.runner.campaign import Problem
from runstore.runner.campaign import SlotKind
from runstore.runner.executor import PLACEHOLDERS
from runstore.runner.executor import expand_command
from runstore.validation import MAX_NAME_LENGTH
from runstore.validation import check_store_path

MAX_PAIRS: Final = 10_000
"""Most candidate x problem pairs one campaign may have."""

MAX_FILE_SIZE: Final = 64 * 2**20
"""Largest input file, in bytes."""

MAX_TIMEOUT_SECONDS: Final = 7 * 86_400
DEFAULT_TIMEOUT_SECONDS: Final = 600
MIN_LEASE_SECONDS: Final = 3
MAX_LEASE_SECONDS: Final = 3_600
DEFAULT_LEASE_SECONDS: Final = 60

_ENV_NAME = re.compile("[A-Za-z_][A-Za-z0-9_]*")
_TOML_POSITION = re.compile(r"(.*) \(at line (\d+), column (\d+)\)", re.DOTALL)
_NS_PER_SECOND: Final = 10**9
T = TypeVar("T", Candidate, Problem)

MAX_REPETITIONS: Final = 1000
MAX_SLOTS: Final = 100_000
"""Most measurement slots (pairs x repetitions) one campaign may have."""

_TOP_KEYS = frozenset({"campaign", "candidates", "problems", "metrics"})
_CAMPAIGN_KEYS = frozenset(
    {
        "name",
        "slot_kind",
        "checkpoints",
        "warmup",
        "timeout_seconds",
        "lease_seconds",
        "repetitions",
        "seed",
        "packages",
    }
)
MAX_CHECKPOINTS = 1000
_CANDIDATE_KEYS = frozenset(
    {
        "name",
        "command",
        "env",
        "files",
        "applies_to",
        "timeout_seconds",
        "parameters",
        "grid",
        "repetitions",
        "warmup",
    }
)
_PROBLEM_KEYS = frozenset({"name", "parameters", "grid", "files", "tags"})


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
    name rule, duplicate candidate or problem names (grid members included), infinite or
    NaN floats, dates and out-of-range integers in parameters, grids that expand into a bad
    name or more than 10,000 members, ``applies_to`` entries naming no problem or tag, file
    names that are not normalized relative paths of regular files (not symbolic links)
    inside the directory, larger than 64 MiB or used by both a candidate and a problem, no
    candidate, no problem, more than 10,000 candidate x problem pairs or 100,000
    measurement slots, and bad ``[metrics]`` declarations (each naming the key path).
    """
    if type(text) is not str or type(path) is not str:
        raise CampaignInvalidError("parse_campaign takes the text and the path as strings")
    document = _toml(text, path)
    try:
        return _campaign(document, path)
    except checks.Refusal as refusal:
        raise CampaignInvalidError(f"{path}: {refusal.key}: {refusal.reason}") from None


def _toml(text: str, path: str) -> dict[str, object]:
    try:
        return tomllib.loads(text, parse_float=checks.TomlFloat)
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
    top = checks.table(document, "", _TOP_KEYS, required=_TOP_KEYS - {"metrics"})
    settings = checks.table(top["campaign"], "campaign", _CAMPAIGN_KEYS, required={"name"})
    name = checks.name(settings["name"], "campaign.name")
    slot_kind = _slot_kind(settings.get("slot_kind", SlotKind.ONE_SHOT.value))
    checkpoints = _checkpoints(settings.get("checkpoints"), slot_kind)
    warmup = _flag(settings.get("warmup", False), "campaign.warmup")
    timeout_ns = _timeout_ns(settings.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS), "campaign")
    lease = settings.get("lease_seconds", DEFAULT_LEASE_SECONDS)
    lease_ns = _seconds_ns(lease, "campaign.lease_seconds", MIN_LEASE_SECONDS, MAX_LEASE_SECONDS)
    repetitions = _repetitions(settings.get("repetitions", 1), "campaign.repetitions")
    seed = settings.get("seed", 0)
    if type(seed) is not int or not 0 <= seed <= MAX_SAFE_INTEGER:
        checks.refuse("campaign.seed", f"must be an integer from 0 to 2**53-1, got {seed!r:.80}")
    packages = checks.names(settings.get("packages", []), "campaign.packages")
    candidates, problems = _entries(top, os.path.dirname(os.path.abspath(path)))
    slots = len(problems) * sum(
        repetitions if candidate.repetitions is None else candidate.repetitions
        for candidate in candidates
    )
    if slots > MAX_SLOTS:
        checks.refuse("campaign.repetitions", f"more than {MAX_SLOTS} measurement slots")
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
        repetitions=repetitions,
        seed=seed,
        packages=packages,
        metrics=campaign_values.metrics(top.get("metrics", {})),
    )


def _flag(value: object, key: str) -> bool:
    if type(value) is not bool:
        checks.refuse(key, f"must be true or false, got {checks.kind(value)}")
    return value


def _repetitions(value: object, key: str) -> int:
    if type(value) is not int or not 1 <= value <= MAX_REPETITIONS:
        checks.refuse(key, f"must be an integer from 1 to {MAX_REPETITIONS}, got {value!r:.80}")
    return value


def _checkpoints(value: object, slot_kind: SlotKind) -> int | None:
    """A stream's number of checkpoint slots (required for a stream, refused otherwise)."""
    key = "campaign.checkpoints"
    if slot_kind is not SlotKind.STREAM:
        if value is not None:
            checks.refuse(key, 'only a stream (slot_kind = "stream") has checkpoints')
        return None
    if value is None:
        checks.refuse(key, "missing (a stream needs its number of checkpoints)")
    if type(value) is not int or not 1 <= value <= MAX_CHECKPOINTS:
        checks.refuse(key, f"must be an integer from 1 to {MAX_CHECKPOINTS}, got {value!r:.80}")
    return value


def _entries(
    top: dict[str, object], base: str
) -> tuple[tuple[Candidate, ...], tuple[Problem, ...]]:
    """The candidates and problems (grids expanded), checked against each other (problems
    first, since ``applies_to`` names them)."""
    candidate_tables = checks.array_of_tables(top["candidates"], "candidates", "candidate")
    problem_tables = checks.array_of_tables(top["problems"], "problems", "problem")
    digests = _Digests(base)
    problems = _unique_members(
        [
            (f"problems[{i}]", _gridded(table), _problems(table, f"problems[{i}]", digests))
            for i, table in problem_tables
        ]
    )
    known = {problem.name for problem in problems}.union(*(p.tags for p in problems))
    candidates = _unique_members(
        [
            (
                f"candidates[{i}]",
                _gridded(table),
                _candidates(table, f"candidates[{i}]", digests, known),
            )
            for i, table in candidate_tables
        ]
    )
    pairs = len(candidates) * len(problems)
    if pairs > MAX_PAIRS:
        checks.refuse("candidates", f"{pairs} candidate x problem pairs, more than {MAX_PAIRS}")
    _check_file_names(candidates, problems)
    return candidates, problems


def _unique_members(entries: list[tuple[str, bool, list[T]]]) -> tuple[T, ...]:
    """The members of every entry ``(key, from a grid, members)`` in order, refusing a
    name used twice; the message names where each came from (``problems[2].name``, or
    ``problems[1].grid`` for a grid's member)."""
    seen: dict[str, str] = {}
    members: list[T] = []
    for key, from_grid, found in entries:
        origin = f"{key}.grid" if from_grid else f"{key}.name"
        for member in found:
            if member.name in seen:
                checks.refuse(origin, f"duplicate {member.name!r} (also {seen[member.name]})")
            seen[member.name] = origin
            members.append(member)
    return tuple(members)


def _gridded(table: object) -> bool:
    return isinstance(table, dict) and "grid" in table


def _entry_parameters(table: dict[str, object], key: str) -> list[tuple[str, dict[str, JSON]]]:
    """An entry's (name, parameters) members: itself, or one per combination of its grid."""
    name = checks.name(table["name"], f"{key}.name")
    fixed = campaign_values.parameters(table.get("parameters", {}), f"{key}.parameters")
    if "grid" not in table:
        return [(name, fixed)]
    return campaign_values.grid_members(name, table["grid"], fixed, f"{key}.grid")


def _candidates(value: object, key: str, digests: _Digests, known: set[str]) -> list[Candidate]:
    table = checks.table(value, key, _CANDIDATE_KEYS, required={"name", "command"})
    members = _entry_parameters(table, key)
    command = _command(table["command"], f"{key}.command")
    env = _env(table.get("env", {}), f"{key}.env")
    applies_to = None
    if "applies_to" in table:
        applies_to = checks.names(table["applies_to"], f"{key}.applies_to", nonempty=True)
        for index, target in enumerate(applies_to):
            if target not in known:
                checks.refuse(f"{key}.applies_to[{index}]", f"{target!r} names no problem or tag")
    timeout = table.get("timeout_seconds")
    repetitions = table.get("repetitions")
    warmup = table.get("warmup")
    files = digests.files(table.get("files", []), f"{key}.files")
    return [
        Candidate(
            name=name,
            command=command,
            env=env,
            files=files,
            applies_to=applies_to,
            timeout_ns=None if timeout is None else _timeout_ns(timeout, key),
            parameters_json=campaign_values.encoded(parameters, f"{key}.parameters"),
            repetitions=None
            if repetitions is None
            else _repetitions(repetitions, f"{key}.repetitions"),
            warmup=None if warmup is None else _flag(warmup, f"{key}.warmup"),
        )
        for name, parameters in members
    ]


def _problems(value: object, key: str, digests: _Digests) -> list[Problem]:
    table = checks.table(value, key, _PROBLEM_KEYS, required={"name"})
    members = _entry_parameters(table, key)
    files = digests.files(table.get("files", []), f"{key}.files")
    tags = checks.names(table.get("tags", []), f"{key}.tags")
    return [
        Problem(
            name=name,
            parameters_json=campaign_values.encoded(parameters, f"{key}.parameters"),
            files=files,
            tags=tags,
        )
        for name, parameters in members
    ]


def _command(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        checks.refuse(key, f"must be a nonempty list of strings, got {checks.kind(value)}")
    command = tuple(checks.plain(item, f"{key}[{index}]") for index, item in enumerate(value))
    try:
        expand_command(command, dict.fromkeys(PLACEHOLDERS, ""))
    except ValueError as error:
        known = ", ".join(f"{{{name}}}" for name in PLACEHOLDERS)
        checks.refuse(key, f"{error} (placeholders: {known}; write {{{{ and }}}} for braces)")
    return command


def _env(value: object, key: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        checks.refuse(key, f"must be a table of strings, got {checks.kind(value)}")
    pairs: list[tuple[str, str]] = []
    for name, item in value.items():
        where = checks.child(key, name)
        if _ENV_NAME.fullmatch(name) is None or len(name) > MAX_NAME_LENGTH:
            checks.refuse(where, "environment names match [A-Za-z_][A-Za-z0-9_]* (256 at most)")
        if name.startswith("RUNSTORE_"):
            checks.refuse(where, "names starting with RUNSTORE_ are reserved for the runner")
        pairs.append((name, checks.plain(item, where)))
    return tuple(sorted(pairs))


def _slot_kind(value: object) -> SlotKind:
    kinds = [kind.value for kind in SlotKind]
    if not isinstance(value, str) or value not in kinds:
        checks.refuse("campaign.slot_kind", f"must be one of {', '.join(kinds)}, got {value!r:.80}")
    return SlotKind(value)


def _timeout_ns(value: object, key: str) -> int:
    return _seconds_ns(value, f"{key}.timeout_seconds", 1, MAX_TIMEOUT_SECONDS)


def _seconds_ns(value: object, key: str, low: int, high: int) -> int:
    if type(value) is not int:
        checks.refuse(
            key, f"must be a whole number of seconds (an integer), got {checks.kind(value)}"
        )
    if not low <= value <= high:
        checks.refuse(key, f"must be between {low} and {high} seconds, got {value}")
    return value * _NS_PER_SECOND


# --- input files ------------------------------------------------------------------------


class _Digests:
    """Reads and digests input files under ``base``, each name once per campaign."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.known: dict[str, InputFile] = {}

    def files(self, value: object, key: str) -> tuple[InputFile, ...]:
        if not isinstance(value, list):
            checks.refuse(key, f"must be a list of relative paths, got {checks.kind(value)}")
        names = [_relative_path(item, f"{key}[{index}]") for index, item in enumerate(value)]
        for index, name in enumerate(names):
            if name in names[:index]:
                checks.refuse(f"{key}[{index}]", f"{name!r} is listed twice")
            if name not in self.known:
                self.known[name] = _input_file(self.base, name, f"{key}[{index}]")
        return tuple(self.known[name] for name in names)


def _relative_path(value: object, key: str) -> str:
    if not isinstance(value, str):
        checks.refuse(key, f"must be a string, got {checks.kind(value)}")
    if value.startswith("/"):
        checks.refuse(key, f"{value!r:.80} is absolute; name files relative to the campaign file")
    try:
        return check_store_path(value, "path")
    except InvalidRecordError:
        checks.refuse(key, f"{value!r:.80} is not a normalized relative POSIX path")


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
        checks.refuse(key, f"{source}: cannot read: {error.strerror}")
    return InputFile(name=name, source=source, sha256=sha256, size=size)


def _check_mode(path: str, key: str, wanted: Callable[[int], bool], problem: str) -> None:
    try:
        mode = os.lstat(path).st_mode
    except OSError as error:
        checks.refuse(key, f"{path}: {error.strerror}")
    if stat.S_ISLNK(mode):
        checks.refuse(key, f"{path}: is a symbolic link (not followed)")
    if not wanted(mode):
        checks.refuse(key, f"{path}: {problem}")


def _digest(source: str, key: str) -> tuple[str, int]:
    # O_NOFOLLOW and the fstat close the gap between the lstat above and this open.
    descriptor = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            checks.refuse(key, f"{source}: is not a regular file")
        digest = hashlib.sha256()
        size = 0
        while chunk := file.read(2**20):
            size += len(chunk)
            if size > MAX_FILE_SIZE:
                checks.refuse(key, f"{source}: larger than {MAX_FILE_SIZE} bytes (64 MiB)")
            digest.update(chunk)
    return digest.hexdigest(), size


def _check_file_names(candidates: tuple[Candidate, ...], problems: tuple[Problem, ...]) -> None:
    """A worker's directory holds its candidate's and its problem's files side by side, so
    no name may belong to both (checked over all candidates and problems, not per pair)."""
    candidate_names = {file.name for candidate in candidates for file in candidate.files}
    for index, problem in enumerate(problems):
        for position, file in enumerate(problem.files):
            if file.name in candidate_names:
                checks.refuse(
                    f"problems[{index}].files[{position}]",
                    f"{file.name!r} is also a candidate's file",
                )

"""Shapes, names and refusals shared by the campaign reader's modules (SPEC.md section 15.1).

Rules of this file: pure checks of values tomllib produced; each refusal is a
:class:`Refusal` carrying the key path, which :func:`runstore.runner.campaign_file.parse_campaign`
turns into one ``campaign_invalid`` line that starts with the file's path. Nothing here
reads a file.
"""

from __future__ import annotations

import json
import re
from typing import Final
from typing import NoReturn

import attrs
from runstore.validation import MAX_NAME_LENGTH
from runstore.validation import is_control

NAME: Final = re.compile("[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
NAME_RULE: Final = "1 to 64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit"
_BARE_KEY: Final = re.compile("[A-Za-z0-9_-]+")
_KIND_NAMES = {"bool": "boolean", "int": "integer", "str": "string", "TomlFloat": "float"}
_KIND_NAMES |= {"list": "array", "dict": "table"}


class Refusal(Exception):
    """A refusal at ``key`` (a key path), turned into :class:`CampaignInvalidError` by
    :func:`parse_campaign`, which knows the file's path."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


@attrs.frozen
class TomlFloat:
    """A TOML float, kept as its literal so the refusal can quote what was written."""

    literal: str


def refuse(key: str, reason: str) -> NoReturn:
    raise Refusal(key, reason)


def kind(value: object) -> str:
    """The TOML name of a value's type, for messages (datetime, date and time as is)."""
    name = type(value).__name__
    return _KIND_NAMES.get(name, name)


def child(key: str, name: str) -> str:
    """The key path of ``name`` inside ``key``, quoting a name that is not a bare key."""
    shown = name if _BARE_KEY.fullmatch(name) else json.dumps(name)
    return f"{key}.{shown}" if key else shown


def table(
    value: object, key: str, allowed: frozenset[str], *, required: set[str] | frozenset[str]
) -> dict[str, object]:
    if not isinstance(value, dict):
        refuse(key, f"must be a table, got {kind(value)}")
    for name in value:
        if name not in allowed:
            refuse(child(key, name), "unknown key")
    for name in sorted(required):
        if name not in value:
            refuse(child(key, name), "missing")
    return value


def array_of_tables(value: object, key: str, what: str) -> list[tuple[int, object]]:
    if not isinstance(value, list):
        refuse(key, f"must be an array of tables ([[{key}]]), got {kind(value)}")
    if not value:
        refuse(key, f"at least one {what} is required")
    return list(enumerate(value))


def unique(names: list[str], key: str, field: str) -> None:
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        if name in seen:
            refuse(f"{key}[{index}].{field}", f"duplicate {name!r} (also {key}[{seen[name]}])")
        seen[name] = index


def name(value: object, key: str) -> str:
    if not isinstance(value, str):
        refuse(key, f"must be a string, got {kind(value)}")
    if NAME.fullmatch(value) is None:
        refuse(key, f"must be {NAME_RULE}, got {value!r:.80}")
    return value


def names(value: object, key: str, *, nonempty: bool = False) -> tuple[str, ...]:
    if not isinstance(value, list) or (nonempty and not value):
        wanted = "a nonempty list" if nonempty else "a list"
        refuse(key, f"must be {wanted} of names, got {kind(value)}")
    found = [name(item, f"{key}[{index}]") for index, item in enumerate(value)]
    for index, entry in enumerate(found):
        if entry in found[:index]:
            refuse(f"{key}[{index}]", f"{entry!r} is listed twice")
    return tuple(found)


def plain(value: object, key: str) -> str:
    """A plain string (SPEC.md section 4): nonempty, at most 256 code points, no control
    character; tomllib never yields a lone surrogate."""
    if not isinstance(value, str):
        refuse(key, f"must be a string, got {kind(value)}")
    if not value:
        refuse(key, "must be nonempty")
    if len(value) > MAX_NAME_LENGTH:
        refuse(key, f"is longer than {MAX_NAME_LENGTH} characters")
    if any(is_control(char) for char in value):
        refuse(key, "contains a control character")
    return value

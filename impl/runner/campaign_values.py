"""Parameter values, floats and grids of a campaign file (SPEC.md section 15.1).

Rules of this file: pure conversions of values tomllib produced into canonical JSON, each
refusal a :class:`~runstore.runner.campaign_checks.Refusal` at its key path. A TOML float
becomes its exact shortest decimal text (Python's ``repr``: ``0.0001`` -> ``"0.0001"``,
``1e-7`` -> ``"1e-07"``), since canonical JSON (section 2) has no floats; so a float never
makes an identity depend on how a language prints it. A grid (a table of value lists)
expands into its members, in a fixed order and with names derived from their values.
"""

from __future__ import annotations

import itertools
import math
from typing import Final

from runstore.canonical import JSON
from runstore.canonical import MAX_DEPTH
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.canonical import encode
from runstore.errors import InvalidCanonicalJsonError
from runstore.runner import campaign_checks as checks
from runstore.runner.campaign import MetricDeclaration

MAX_GRID_MEMBERS: Final = 10_000
"""Most members one grid may expand into."""
MAX_UNIT_LENGTH: Final = 32
_METRIC_KEYS: Final = frozenset({"direction", "unit", "threshold"})


def decimal_text(value: checks.TomlFloat, key: str) -> str:
    """A TOML float as its shortest round-trip decimal text; infinities and NaN refused."""
    number = float(value.literal.replace("_", ""))
    if not math.isfinite(number):
        checks.refuse(key, f"{value.literal} is not a finite number")
    return repr(number)


def parameters(value: object, key: str) -> dict[str, JSON]:
    """A ``parameters`` table as a canonical JSON object (floats as decimal text)."""
    if not isinstance(value, dict):
        checks.refuse(key, f"must be a table, got {checks.kind(value)}")
    converted = to_json(value, key, 1)
    assert isinstance(converted, dict)
    return converted


def encoded(value: dict[str, JSON], key: str) -> bytes:
    try:
        return encode(value)
    except InvalidCanonicalJsonError as error:  # what to_json let through; kept as a net
        checks.refuse(key, f"not canonical JSON: {error.message}")


def to_json(value: object, key: str, depth: int) -> JSON:
    """The canonical JSON value of a TOML parameter value (``depth`` counts containers)."""
    if isinstance(value, (bool, str)):
        return value
    if type(value) is int:
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            checks.refuse(key, "integers beyond +/-(2**53-1) are not allowed (write a string)")
        return value
    if isinstance(value, checks.TomlFloat):
        return decimal_text(value, key)
    if isinstance(value, (list, dict)) and depth > MAX_DEPTH:
        checks.refuse(key, f"arrays and tables nest deeper than {MAX_DEPTH}")
    if isinstance(value, list):
        return [to_json(item, f"{key}[{index}]", depth + 1) for index, item in enumerate(value)]
    if isinstance(value, dict):
        return {
            name: to_json(item, checks.child(key, name), depth + 1) for name, item in value.items()
        }
    checks.refuse(
        key, f"{checks.kind(value)}s are not allowed (dates and times must be written as strings)"
    )


def _scalar_text(value: JSON) -> str:
    """How a grid value appears in a member's name."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def grid_members(
    base: str, grid: object, fixed: dict[str, JSON], key: str
) -> list[tuple[str, dict[str, JSON]]]:
    """The members of ``base``'s grid: one per combination of the grid's values (the first
    key varying slowest, each key's values in the order written), named
    ``<base>-<value>-<value>...`` in key order, with parameters ``fixed`` plus the
    combination. Grid values are strings, integers, floats or booleans; a key may not also
    be a fixed parameter; a member name must satisfy the name rule."""
    if not isinstance(grid, dict) or not grid:
        checks.refuse(key, f"must be a nonempty table of value lists, got {checks.kind(grid)}")
    axes: list[tuple[str, list[JSON]]] = []
    count = 1
    for name, values in grid.items():
        where = checks.child(key, name)
        if name in fixed:
            checks.refuse(where, "is also a fixed parameter")
        if not isinstance(values, list) or not values:
            checks.refuse(where, f"must be a nonempty array of values, got {checks.kind(values)}")
        converted = [_grid_value(item, f"{where}[{index}]") for index, item in enumerate(values)]
        texts = [_scalar_text(item) for item in converted]
        for index, text in enumerate(texts):
            if text in texts[:index]:
                checks.refuse(f"{where}[{index}]", f"{text!r} is listed twice")
        axes.append((name, converted))
        count *= len(converted)
        if count > MAX_GRID_MEMBERS:
            checks.refuse(key, f"expands into more than {MAX_GRID_MEMBERS} members")
    members = []
    for combination in itertools.product(*(values for _, values in axes)):
        name = "-".join([base, *(_scalar_text(value) for value in combination)])
        if checks.NAME.fullmatch(name) is None:
            checks.refuse(
                key,
                f"member name {name!r:.80} breaks the name rule ({checks.NAME_RULE}); "
                "use shorter values or values made of those characters",
            )
        values = dict(fixed)
        values.update({axis: value for (axis, _), value in zip(axes, combination, strict=True)})
        members.append((name, values))
    return members


def _grid_value(value: object, key: str) -> JSON:
    if isinstance(value, checks.TomlFloat):
        return decimal_text(value, key)
    if isinstance(value, (bool, str)) or type(value) is int:
        return to_json(value, key, 1)
    checks.refuse(key, f"grid values are strings, numbers or booleans, got {checks.kind(value)}")


# --- the [metrics] table ---------------------------------------------------------------


def metrics(value: object) -> tuple[MetricDeclaration, ...]:
    """The ``[metrics]`` table: ``name = { direction = "lower" | "higher", unit = "...",
    threshold = <number greater than 0> }``, sorted by name."""
    if not isinstance(value, dict):
        checks.refuse("metrics", f"must be a table of metric tables, got {checks.kind(value)}")
    declared = []
    for name, item in value.items():
        key = checks.child("metrics", name)
        checks.plain(name, key)
        table = checks.table(item, key, _METRIC_KEYS, required={"direction"})
        direction = table["direction"]
        if direction not in ("lower", "higher"):
            checks.refuse(f"{key}.direction", f'must be "lower" or "higher", got {direction!r:.80}')
        unit = table.get("unit", "")
        if unit != "":
            unit = checks.plain(unit, f"{key}.unit")
            if len(unit) > MAX_UNIT_LENGTH:
                checks.refuse(f"{key}.unit", f"is longer than {MAX_UNIT_LENGTH} characters")
        declared.append(
            MetricDeclaration(
                name=name,
                direction=str(direction),
                unit=str(unit),
                threshold=_threshold(table.get("threshold"), f"{key}.threshold"),
            )
        )
    return tuple(sorted(declared, key=lambda metric: metric.name))


def _threshold(value: object, key: str) -> str | None:
    """A relative spread above which a metric is unstable, as exact decimal text."""
    if value is None:
        return None
    if isinstance(value, checks.TomlFloat):
        text = decimal_text(value, key)
    elif type(value) is int and value <= MAX_SAFE_INTEGER:
        text = str(value)
    else:
        checks.refuse(key, f"must be a number greater than 0, got {checks.kind(value)}")
    if not float(text) > 0:
        checks.refuse(key, f"must be greater than 0, got {text}")
    return text

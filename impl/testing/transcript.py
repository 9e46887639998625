"""Markdown transcripts of model operations: :class:`Transcript` runs model operations one
at a time and records each call, its result or refusal, and the difference it made to the
state; rendering is a pure function of that record.

Rules of this file: pure (no I/O); the named scenarios live in
:mod:`runstore.testing.scenarios`, and the command that writes or checks the committed
transcripts in :mod:`runstore.testing.trace`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import TypeVar

import attrs
from runstore.model.state import ModelState
from runstore.model.state import Refusal

R = TypeVar("R")

_DIGEST = re.compile("[0-9a-f]{64}")


def render(value: object) -> str:
    """A deterministic one-line rendering. 64-hex digests are cut to 8 digits and an
    ellipsis; attrs values render as ``Class(field=value, ...)`` without None fields."""
    if isinstance(value, enum.Enum):
        return render(value.value)
    if isinstance(value, str):
        return '"' + _DIGEST.sub(lambda match: match.group()[:8] + "…", value) + '"'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if attrs.has(type(value)):
        return f"{type(value).__name__}({_render_fields(value)})"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{render(k)}: {render(v)}" for k, v in value.items()) + "}"
    if isinstance(value, frozenset | set):
        return "{" + ", ".join(sorted(render(item) for item in value)) + "}"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(render(item) for item in value) + "]"
    raise TypeError(f"cannot render {type(value).__name__}")


def _fields(value: object) -> dict[str, object]:
    """The public fields of an attrs value (aliases for private fields), in order."""
    cls = type(value)
    assert attrs.has(cls)
    return {field.alias: getattr(value, field.alias) for field in attrs.fields(cls)}


def _render_fields(value: object) -> str:
    return ", ".join(f"{k}={render(v)}" for k, v in _fields(value).items() if v is not None)


@attrs.frozen(kw_only=True)
class Step:
    """One recorded call."""

    operation: str
    arguments: Mapping[str, object]
    result: object
    before: ModelState
    after: ModelState


class Transcript:
    """Runs model operations against a current state and records each step."""

    def __init__(self) -> None:
        self.state = ModelState()
        self.steps: list[Step] = []

    def do(self, operation: Callable[..., tuple[ModelState, R]], **arguments: Any) -> R:
        """Apply ``operation(state, **arguments)``, record it, and return its result. A
        refusal must come back with the very same state object."""
        before = self.state
        self.state, result = operation(before, **arguments)
        if isinstance(result, Refusal):
            assert self.state is before, f"{operation.__name__} refused but changed the state"
        self.steps.append(
            Step(
                operation=operation.__name__,
                arguments=arguments,
                result=result,
                before=before,
                after=self.state,
            )
        )
        return result

    def ask(self, query: Callable[..., R], **arguments: Any) -> R:
        """Evaluate a read-only ``query(state, **arguments)`` and record it."""
        result = query(self.state, **arguments)
        self.steps.append(
            Step(
                operation=query.__name__,
                arguments=arguments,
                result=result,
                before=self.state,
                after=self.state,
            )
        )
        return result


def state_changes(before: ModelState, after: ModelState) -> list[str]:
    """The differences between two states as lines, table by table in field order: for
    keyed tables and sets the added, removed and changed entries (each sorted by their
    rendering), for the history tuples the appended rows in order."""
    if before is after:
        return []
    lines: list[str] = []
    for name, old in _fields(before).items():
        new = getattr(after, name)
        if isinstance(old, Mapping):
            assert isinstance(new, Mapping)
            added = sorted(new.keys() - old.keys(), key=render)
            removed = sorted(old.keys() - new.keys(), key=render)
            changed = sorted((k for k in old.keys() & new.keys() if old[k] != new[k]), key=render)
            lines.extend(f"+ {name}[{render(key)}]: {render(new[key])}" for key in added)
            lines.extend(f"- {name}[{render(key)}]" for key in removed)
            lines.extend(
                f"~ {name}[{render(key)}]: {_row_change(old[key], new[key])}" for key in changed
            )
        elif isinstance(old, frozenset):
            assert isinstance(new, frozenset)
            lines.extend(sorted(f"+ {name} {render(item)}" for item in new - old))
            lines.extend(sorted(f"- {name} {render(item)}" for item in old - new))
        else:
            assert isinstance(old, tuple) and isinstance(new, tuple)
            lines.extend(f"+ {name}: {render(item)}" for item in new[len(old) :])
    return lines


def _row_change(old: object, new: object) -> str:
    before, after = _fields(old), _fields(new)
    return ", ".join(
        f"{name} {render(before[name])} -> {render(after[name])}"
        for name in before
        if before[name] != after[name]
    )


def render_transcript(name: str, title: str, transcript: Transcript) -> str:
    """The Markdown transcript of a finished scenario."""
    lines = [
        f"# Model trace: {name}",
        "",
        title,
        "",
        "<!-- generated by python -m runstore.testing.trace --all; do not edit -->",
        "",
    ]
    for number, step in enumerate(transcript.steps, start=1):
        lines.append(f"## {number}. {step.operation}")
        lines.append("")
        for key, value in step.arguments.items():
            lines.append(f"- {key}: `{render(value)}`")
        if isinstance(step.result, Refusal):
            lines.append(f"- **refused** `{step.result.code}`: {step.result.message}")
        else:
            lines.append(f"- result: `{render(step.result)}`")
        changes = state_changes(step.before, step.after)
        lines.append("")
        if changes:
            lines.append("State changes:")
            lines.append("")
            lines.extend(f"    {change}" for change in changes)
        else:
            lines.append("State unchanged.")
        lines.append("")
    return "\n".join(lines)

"""The conformance vector generators, one module per vector file (format in
``vectors/README.md`` and SPEC.md section 10), and the pieces they share.

* :mod:`vectorgen.canonical_json`: ``vectors/canonical_json.json``
* :mod:`vectorgen.identities`: ``vectors/identities.json``
* :mod:`vectorgen.events`: ``vectors/events.json``
* :mod:`vectorgen.content`: ``vectors/content.json``
* :mod:`vectorgen.outcomes`: ``vectors/outcomes.json``
* :mod:`vectorgen.recovery`: ``vectors/recovery.json``

Each module holds its cases as data and a ``build()`` returning its file's text; the bytes
come from the library. ``tools/regen`` writes (or, with ``--check``, checks) them together
with the other generated files, and ``conformance/vectors/test_vectors.py`` checks both that the
committed files are what ``build()`` produces and, independently, that every vector holds
(``content.json``, ``outcomes.json`` and ``recovery.json``:
``conformance/vectors/test_content.py``, ``conformance/vectors/test_outcomes.py`` and
``conformance/vectors/test_recovery.py``).

Rules of this package: no file I/O (``tools/regen`` owns the files); ``events``,
``outcomes`` and ``recovery`` open stores, each on temporary roots of its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from typing import Final

from runstore.errors import RunStoreError
from runstore.kit import wire

FORMAT_VERSION: Final = 1
"""``format_version`` of every vector file: changes when a file's layout changes."""

GENERATOR: Final = "tools/regen"
"""The ``generator`` value every file carries: the command that writes it."""


def header(format_name: str) -> dict[str, Any]:
    """The keys every vector file opens with: ``format`` (``format_name``, the file's name
    for itself), ``format_version`` and ``generator``."""
    return {"format": format_name, "format_version": FORMAT_VERSION, "generator": GENERATOR}


describe = wire.describe
"""The language-neutral description of a Python value, JSON or not: a tagged array
(``vectors/README.md``, "Value descriptions"); the conformance kit's own, so the kit and
the files describe values alike."""


def refusal_code(operation: Callable[..., object], *arguments: object) -> str:
    """The ``code`` of the refusal ``operation(*arguments)`` raises (it must raise one)."""
    try:
        operation(*arguments)
    except RunStoreError as error:
        return error.code
    raise AssertionError("a refusal case was accepted")


def render(document: dict[str, Any]) -> str:
    """Deterministic text of a vector file: ASCII JSON, keys sorted, each top-level list one
    case per line, and a trailing newline."""
    lines = ["{"]
    keys = sorted(document)
    for position, key in enumerate(keys):
        comma = "," if position < len(keys) - 1 else ""
        value = document[key]
        if isinstance(value, list):
            lines.append(f"  {json.dumps(key)}: [")
            for index, case in enumerate(value):
                tail = "," if index < len(value) - 1 else ""
                lines.append("    " + json.dumps(case, sort_keys=True, ensure_ascii=True) + tail)
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=True)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"

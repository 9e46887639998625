"""The metrics format: a worker's ``result.json``, the result object an observation keeps
(``{"metrics": {name: decimal string}}``), and reading a stored result's metrics back.

Rules of this file: value layer; pure functions (no I/O, no clock). This is the one
definition of the format (SPEC.md section 15.3, "The worker protocol", and section 16.3):
the runner's verdict on a worker's bytes (:mod:`runstore.runner.worker_result`) parses
with :func:`parse_result_document`, and the inspection reader (``status``, ``explain``,
``export``; :mod:`runstore.inspection.reader`) reads stored results with
:func:`stored_metrics`. Worker bytes are untrusted: parsing fails closed with a one-line
:class:`ValueError`. Reading is wider on purpose: a store also holds observations other
writers registered through its API, whose string and integer metrics are shown as they are;
every value the runner stores reads back unchanged (``conformance/values/test_metrics.py``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Final

from runstore.canonical import JSON
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.errors import RunStoreError
from runstore.validation import check_text

RESULT_NAME: Final = "result.json"
"""The file a worker leaves in its output directory (per checkpoint, for a stream)."""
METRICS: Final = "metrics"
"""The key of the metrics object, in ``result.json`` and in the stored result object."""


def decimal(name: str, number: object) -> str:
    """A metric value as the decimal string the store keeps: an integer in +/-(2**53-1)
    as its digits, a finite float as its shortest round-trip form (Python's ``repr``).
    ValueError (naming the metric) for anything else, booleans included."""
    if type(number) is int:
        if abs(number) > MAX_SAFE_INTEGER:
            raise ValueError(f"metric {name!r}: integer {number} is out of range")
        return str(number)
    if type(number) is float:
        if not math.isfinite(number):
            raise ValueError(f"metric {name!r}: {number} is not finite")
        return repr(number)
    raise ValueError(f"metric {name!r}: {type(number).__name__} is not a number")


def parse_result_document(document: bytes) -> list[tuple[str, str]]:
    """The metrics of a worker's ``result.json`` as ``(name, decimal string)`` pairs, sorted
    by name: a UTF-8 JSON object with an object ``metrics`` mapping names (plain text) to
    finite numbers, no key twice, no ``NaN`` or infinities. ValueError (a one-line reason)
    when the document is not acceptable."""
    try:
        value = json.loads(
            document.decode("utf-8"),
            object_pairs_hook=_unique_keys,
            parse_constant=_no_constant,
        )
    except UnicodeDecodeError:
        raise ValueError(f"{RESULT_NAME} is not UTF-8") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{RESULT_NAME} is not JSON: {error}") from None
    except RecursionError:  # the decoder's own depth guard, before the stack runs out
        raise ValueError(f"{RESULT_NAME} nests too deeply") from None
    if not isinstance(value, dict):
        raise ValueError(f"{RESULT_NAME} must hold a JSON object")
    metrics = value.get(METRICS)
    if not isinstance(metrics, dict):
        raise ValueError(f"{RESULT_NAME} needs an object {METRICS!r}")
    pairs: list[tuple[str, str]] = []
    for name, number in sorted(metrics.items()):
        try:
            check_text(name, "metric name")
        except RunStoreError as error:
            raise ValueError(f"metric name {name!r:.80}: {error.message}") from None
        pairs.append((name, decimal(name, number)))
    return pairs


def result_object(metrics: Iterable[tuple[str, str]]) -> dict[str, JSON]:
    """The result object an observation keeps for these ``(name, decimal string)`` pairs."""
    return {METRICS: dict(metrics)}


def stored_value(value: object) -> str | None:
    """``value`` of a stored result's metrics object as a metric value, or None when it is
    not one (SPEC.md section 16.3): a string as it is, an integer in decimal. The runner only
    ever stores the decimal strings :func:`decimal` writes, which read back unchanged; an
    observation registered through the store's API by another writer may hold any string or
    integer, which are shown as they are, while booleans, floats, objects and lists are not
    metric values and are skipped."""
    if isinstance(value, str):
        return value
    if type(value) is int:
        return str(value)
    return None


def stored_metrics(result: object) -> dict[str, str]:
    """The metrics of a stored observation result: the members of ``result["metrics"]``
    that are metric values (:func:`stored_value`), in the object's order; ``{}`` when
    ``result`` holds no metrics object (an observation another writer made)."""
    metrics = result.get(METRICS) if isinstance(result, dict) else None
    if not isinstance(metrics, dict):
        return {}
    found: dict[str, str] = {}
    for name, value in metrics.items():
        if isinstance(name, str) and (text := stored_value(value)) is not None:
            found[name] = text
    return found


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r:.80} in {RESULT_NAME}")
        result[key] = value
    return result


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a number")

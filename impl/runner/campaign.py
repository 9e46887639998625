"""A campaign as values: what to run (candidates), on what (problems), and how.

Rules of this file: frozen values only; no file reading, no store. The TOML reader
(:mod:`runstore.runner.campaign_file`) builds these after validating every key, so code
that holds a :class:`Campaign` can trust it. SPEC.md section 15 gives the file format.
"""

from __future__ import annotations

import enum

import attrs
from runstore.canonical import JSON
from runstore.canonical import decode_object


class SlotKind(enum.Enum):
    """The attempt slot kind a campaign registers for each applicable pair."""

    ONE_SHOT = "one_shot"
    FRESH_OBSERVATION = "fresh_observation"
    STREAM = "stream"


@attrs.frozen(kw_only=True)
class InputFile:
    """A file shipped to the worker: its path relative to the campaign file's directory
    (POSIX, normalized: no ``..``, no absolute path), which is also where the worker finds
    it under its working directory; its SHA-256 and size when the campaign was read."""

    name: str
    source: str
    """The absolute path the coordinator reads it from."""
    sha256: str
    size: int


@attrs.frozen(kw_only=True)
class Candidate:
    """What runs: a command template (see :class:`runstore.runner.executor.WorkOrder`),
    extra environment, files it needs, and optionally the problems or tags it applies to
    (None: every problem)."""

    name: str
    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    files: tuple[InputFile, ...]
    applies_to: tuple[str, ...] | None
    timeout_ns: int | None
    parameters_json: bytes = attrs.field(default=b"{}", repr=False)
    """The candidate's own parameters (a canonical JSON object; ``{}`` without any): a grid
    member's values, given to the worker as ``RUNSTORE_CANDIDATE_PARAMETERS``."""
    repetitions: int | None = None
    """This candidate's repetitions (None: the campaign's)."""
    warmup: bool | None = None
    """Whether this candidate's pairs get a warm-up slot (None: the campaign's setting)."""

    @property
    def parameters(self) -> dict[str, JSON]:
        return decode_object(self.parameters_json)


@attrs.frozen(kw_only=True)
class Problem:
    """What a candidate runs on: parameters (a canonical JSON object), files and tags."""

    name: str
    parameters_json: bytes = attrs.field(repr=False)
    files: tuple[InputFile, ...]
    tags: tuple[str, ...]

    @property
    def parameters(self) -> dict[str, JSON]:
        return decode_object(self.parameters_json)


@attrs.frozen(kw_only=True)
class Campaign:
    """A validated campaign file. ``timeout_ns`` is the default per-slot time limit and
    ``lease_ns`` the lease duration the runner requests (and renews at a third of).
    ``checkpoints`` is the number of checkpoint slots of a stream (None for the other
    kinds); ``warmup`` adds a warm-up slot to every applicable pair, run (and accepted)
    before its measurement."""

    name: str
    path: str
    slot_kind: SlotKind
    timeout_ns: int
    lease_ns: int
    candidates: tuple[Candidate, ...]
    problems: tuple[Problem, ...]
    checkpoints: int | None = None
    warmup: bool = False
    repetitions: int = 1
    """Measurement slots per candidate x problem pair (a candidate may override it)."""
    seed: int = 0
    """Seeds the interleaved order in which repetitions run (not identity)."""
    packages: tuple[str, ...] = ()
    """Distribution names whose versions each attempt's environment artifact records."""
    metrics: tuple[MetricDeclaration, ...] = ()
    """The ``[metrics]`` table: each declared metric's direction, unit and threshold."""


@attrs.frozen(kw_only=True)
class MetricDeclaration:
    """One metric of the ``[metrics]`` table: which way is better (``lower`` or
    ``higher``), its unit (``""`` when none is given) and the relative spread
    (MAD / median) above which its statistics are flagged unstable (None: no threshold),
    kept as its exact shortest decimal text."""

    name: str
    direction: str
    unit: str = ""
    threshold: str | None = None

    def to_json(self) -> dict[str, JSON]:
        declared: dict[str, JSON] = {"direction": self.direction, "unit": self.unit}
        if self.threshold is not None:
            declared["threshold"] = self.threshold
        return declared

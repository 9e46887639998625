"""The enumerations of the domain: attempt states and the kinds of slots, artifacts and leases.

Rules of this file: string-valued enums only, no behaviour. The values are normative (they
appear in SQL columns, record documents and event payloads; SPEC.md sections 4 and 5). The legal
edges between attempt states live in :mod:`runstore.edges`.
"""

from __future__ import annotations

import enum
from typing import Final


class AttemptState(enum.StrEnum):
    """The state of an attempt; the legal edges are :mod:`runstore.edges`."""

    RESERVED = "reserved"
    MATERIALIZING = "materializing"
    STARTING = "starting"
    PREPARING = "preparing"
    EXECUTING = "executing"
    CHECKPOINTING = "checkpointing"
    VALIDATING = "validating"
    EVALUATING = "evaluating"
    FINALIZING = "finalizing"
    ACCEPTED = "accepted"
    CENSORED = "censored"
    SUPERSEDED = "superseded"
    FAILED = "failed"


TERMINAL_STATES: Final = frozenset(
    {AttemptState.ACCEPTED, AttemptState.CENSORED, AttemptState.SUPERSEDED, AttemptState.FAILED}
)


class ExecutionKind(enum.StrEnum):
    ONE_SHOT = "one_shot"
    FRESH_OBSERVATION = "fresh_observation"
    STREAM = "stream"


class SlotRole(enum.StrEnum):
    MEASUREMENT = "measurement"
    WARMUP = "warmup"


class ObservationSlotKind(enum.StrEnum):
    RESULT = "result"
    CHECKPOINT = "checkpoint"


class Completion(enum.StrEnum):
    REACHED = "reached"
    NOT_REACHED = "not_reached"


class ArtifactKind(enum.StrEnum):
    ATTEMPT = "attempt"
    OBSERVATION = "observation"
    RESULT = "result"
    METRICS = "metrics"
    DATASET = "dataset"
    SOURCE = "source"
    ENVIRONMENT = "environment"
    OTHER = "other"


class LeasePurpose(enum.StrEnum):
    RESERVATION = "reservation"
    FINALIZATION = "finalization"
    STAGING = "staging"

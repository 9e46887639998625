"""What one run is asked to do, and what it reports at the end.

Rules of this file: values only. :class:`RunOptions` refuses ill-typed and out-of-range
options with ``invalid_record`` when made (the command line checks them first, with its
own words); :class:`RunSummary` is the ``summary`` event's content (SPEC.md section 15.7,
"What `run` reports").
"""

from __future__ import annotations

import attrs
from runstore.canonical import JSON
from runstore.errors import InvalidRecordError
from runstore.recovery_report import RecoveryReport
from runstore.runner.schedule import DEFAULT_RESUME_RETRIES
from runstore.runner.schedule import MAX_RESUME_RETRIES

MAX_JOBS = 256


@attrs.frozen(kw_only=True)
class RunOptions:
    """``retry_failed``: the largest retry index a slot whose attempts all failed may be
    given (None: failed slots are not retried). ``resume``: recover first, and wait for
    leases of interrupted attempts to expire so that recovery can settle them."""

    jobs: int = attrs.field()
    resume: bool = attrs.field(default=False)
    retry_failed: int | None = attrs.field(default=None)
    retry_codes: tuple[str, ...] | None = attrs.field(default=None)
    resume_retries: int = attrs.field(default=DEFAULT_RESUME_RETRIES)
    revise: bool = attrs.field(default=False)

    def __attrs_post_init__(self) -> None:
        if type(self.jobs) is not int or not 1 <= self.jobs <= MAX_JOBS:
            raise InvalidRecordError(f"jobs must be an int from 1 to {MAX_JOBS}")
        if type(self.resume) is not bool:
            raise InvalidRecordError("resume must be a bool")
        bound = self.retry_failed
        if bound is not None and (type(bound) is not int or not 0 <= bound <= 2**53 - 1):
            raise InvalidRecordError("retry_failed must be None or an int from 0 to 2**53-1")
        codes = self.retry_codes
        if codes is not None and (
            type(codes) is not tuple or not codes or any(type(c) is not str for c in codes)
        ):
            raise InvalidRecordError("retry_codes must be None or a nonempty tuple of str")
        if codes is not None and bound is None:
            raise InvalidRecordError("retry_codes limits --retry-failed, which is not given")
        limit = self.resume_retries
        if type(limit) is not int or not 0 <= limit <= MAX_RESUME_RETRIES:
            raise InvalidRecordError(
                f"resume_retries must be an int from 0 to {MAX_RESUME_RETRIES}"
            )
        if type(self.revise) is not bool:
            raise InvalidRecordError("revise must be a bool")


@attrs.frozen(kw_only=True)
class RunSummary:
    slots: int
    excluded: int
    satisfied: int
    accepted: int
    failed: int
    unsatisfied: tuple[str, ...]
    left: tuple[tuple[str, str], ...]
    """Slots this run leaves unsatisfied without (another) attempt, with why:
    ``attempt_in_progress`` (use ``--resume``), ``failed_not_retried`` (use
    ``--retry-failed``), ``retry_bound_reached`` or ``warmup_unsatisfied``."""
    stopped: bool
    recovery: RecoveryReport | None

    def to_json(self) -> dict[str, JSON]:
        return {
            "accepted": self.accepted,
            "excluded": self.excluded,
            "failed": self.failed,
            "satisfied": self.satisfied,
            "slots": self.slots,
            "stopped": self.stopped,
            "unsatisfied": list(self.unsatisfied),
            "left": {label: reason for label, reason in self.left},
        }

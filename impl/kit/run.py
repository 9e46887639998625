"""The kit as one call: :func:`run_kit` runs a level's checks against a driver command and
returns the report (SPEC.md section 18.4); :func:`replay_transcript` replays a lockstep
failure's transcript against a driver.

Rules of this file: levels nest (``values`` < ``writer`` < ``store``); each check runs
even when an earlier one failed; ``progress`` hears of each check as it ends. A driver
that cannot be started raises ``implementation_unavailable`` before any check.
"""

from __future__ import annotations

import importlib.util
import json
import tempfile
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path

import attrs
from runstore.errors import OptionInvalidError

from .cases import Drivers
from .client import Driver
from .client import ProtocolFailure
from .client import split_command
from .report import FAIL
from .report import NOT_IMPLEMENTED
from .report import Check
from .report import Report

LEVELS = ("values", "writer", "store")
VECTORS = Path(__file__).resolve().parents[2] / "vectors"
"""The vector files of this checkout (``vectors/`` beside ``impl/``)."""


@attrs.frozen
class KitOptions:
    level: str = "store"
    vectors: Path = VECTORS
    timeout: float = 30.0
    examples: int = 100
    """Lockstep programs per level that runs one."""
    steps: int = 25
    kills: int = 1
    """Kills per step of each crash scenario."""
    scenarios: tuple[str, ...] = ()
    """Crash scenarios to run (all eligible ones when empty)."""
    only: tuple[str, ...] = ()
    """Checks to run, by name (every check of the level when empty)."""
    shrink_seconds: float = 20.0
    """How long a failed lockstep is shrunk."""

    def wants(self, name: str) -> bool:
        return not self.only or name in self.only

    def __attrs_post_init__(self) -> None:
        if self.level not in LEVELS:
            raise OptionInvalidError(f"--level must be one of {', '.join(LEVELS)}")
        if not (self.vectors / "canonical_json.json").is_file():
            raise OptionInvalidError(f"{self.vectors} holds no vector files: pass --vectors")
        for name, value in (
            ("examples", self.examples),
            ("steps", self.steps),
            ("kills", self.kills),
        ):
            if value < 1:
                raise OptionInvalidError(f"--{name} must be at least 1")
        if self.level != "values" and importlib.util.find_spec("hypothesis") is None:
            raise OptionInvalidError(
                f"level {self.level} runs the lockstep, which needs Hypothesis: "
                "pip install 'runstore[kit]' (level values does not)"
            )
        if not (self.timeout > 0 and self.shrink_seconds > 0):
            raise OptionInvalidError("--timeout and --shrink-seconds must be positive")
        if self.scenarios:
            from .crash import eligible

            known = [scenario.name for scenario in eligible()]
            unknown = [name for name in self.scenarios if name not in known]
            if unknown:
                raise OptionInvalidError(
                    f"no crash scenario {unknown[0]!r}: the scenarios are {', '.join(known)}"
                )


def _lockstep_check(drivers: Drivers, options: KitOptions, store: bool) -> Check:
    from .lockstep import run_lockstep  # Hypothesis only when a level needs it

    check = Check(f"{'store' if store else 'writer'} lockstep")
    missing = _unsupported(drivers, ("open", "projection", "close"))
    if missing:
        check.status, check.detail = NOT_IMPLEMENTED, f"{missing} is unsupported"
        return check
    run = run_lockstep(
        drivers,
        store=store,
        examples=options.examples,
        steps=options.steps,
        shrink_seconds=options.shrink_seconds,
    )
    check.cases = run.examples
    if run.failure.startswith("Unsupported"):
        check.status, check.detail = NOT_IMPLEMENTED, run.failure
    elif run.failure:
        check.status = FAIL
        check.detail = run.failure + "\nshrunk transcript:\n" + run.transcript
    drivers.end()
    return check


def _unsupported(drivers: Drivers, ops: tuple[str, ...]) -> str | None:
    """The first of ``ops`` (made on a scratch root) the driver does not support."""
    with tempfile.TemporaryDirectory(prefix="runstore-kit-probe-") as root:
        for op in ops:
            try:
                reply = drivers.current().request(op, {"root": root} if op == "open" else {})
            except ProtocolFailure:
                drivers.end()
                return None  # the check itself will meet and report the failure
            if reply.kind == "unsupported":
                return op
    return None


def checks(drivers: Drivers, options: KitOptions) -> Iterator[Check]:
    """The level's checks in order (those of ``options.only``), each run as it is asked
    for."""
    from .protocol_cases import protocol_check
    from .replay import events_replay
    from .replay import outcome_replays
    from .replay import recovery_replays
    from .values import value_checks

    known = set(names(options.level))
    unknown = [name for name in options.only if name not in known]
    if unknown:
        raise OptionInvalidError(
            f"no check {unknown[0]!r} at level {options.level}: the checks are "
            + ", ".join(names(options.level))
        )
    if options.wants("protocol refusals"):
        yield protocol_check(drivers)
    yield from value_checks(drivers, options.vectors, options.wants)
    if options.level == "values":
        return
    if options.wants("events.json"):
        yield events_replay(drivers, options.vectors)
    if options.wants("outcomes.json"):
        yield outcome_replays(drivers, options.vectors)
    if options.wants("writer lockstep"):
        yield _lockstep_check(drivers, options, store=False)
    if options.level == "writer":
        return
    from .crash import crash_campaign

    if options.wants("recovery.json"):
        yield recovery_replays(drivers, options.vectors)
    if options.wants("store lockstep"):
        yield _lockstep_check(drivers, options, store=True)
    if options.wants("crash campaign"):
        yield crash_campaign(drivers, kills=options.kills, names=options.scenarios)


def names(level: str) -> list[str]:
    """Every check's name at ``level``, in the order they run."""
    from .values import SECTIONS

    found = ["protocol refusals", *(f"{file} {section}" for file, section, _ in SECTIONS)]
    if level != "values":
        found += ["events.json", "outcomes.json", "writer lockstep"]
    if level == "store":
        found += ["recovery.json", "store lockstep", "crash campaign"]
    return found


def run_kit(
    command: str | list[str],
    options: KitOptions | None = None,
    progress: Callable[[Check, Report], None] | None = None,
) -> Report:
    """Every check of ``options.level`` against the driver ``command``; ``progress`` hears
    of each check as it ends (with the report so far)."""
    options = options or KitOptions()
    words = split_command(command) if isinstance(command, str) else list(command)
    drivers = Drivers(words, options.timeout)
    drivers.current()  # implementation_unavailable now, before any check
    report = Report(implementation=drivers.implementation, level=options.level)
    try:
        for check in checks(drivers, options):
            report.checks.append(check)
            if progress is not None:
                progress(check, report)
    finally:
        drivers.end()
    return report


def replay_transcript(
    command: str | list[str], transcript: str, timeout: float = 30.0
) -> list[str]:
    """Send each request of ``transcript`` (its ``> `` lines, ``hello`` excepted) to a new
    driver and compare each response with the transcript's (a refusal by its code only);
    returns the differences (none: the driver answers as recorded). Each ``open`` gets a
    new empty root in place of the recorded one (which the run removed)."""
    words = split_command(command) if isinstance(command, str) else list(command)
    differences: list[str] = []
    lines = [line for line in transcript.splitlines() if line.startswith(("> ", "< "))]
    pairs = [(lines[i][2:], lines[i + 1][2:]) for i in range(0, len(lines) - 1, 2)]
    with (
        Driver(words, timeout=timeout).start() as driver,
        tempfile.TemporaryDirectory(prefix="runstore-kit-replay-") as roots,
    ):
        for number, (request_line, response_line) in enumerate(pairs):
            request, recorded = json.loads(request_line), json.loads(response_line)
            if request.get("op") == "hello":
                continue
            if request.get("op") == "open":
                root = Path(roots) / str(number)
                root.mkdir()
                request["args"] = {**request["args"], "root": str(root)}
            try:
                reply = driver.request(request["op"], request["args"])
            except ProtocolFailure as failure:
                return [*differences, f"{request['op']}: protocol: {failure}"]
            wanted = _recorded(recorded)
            if reply.outcome() != wanted:
                differences.append(f"{request['op']}: got {reply.outcome()!r}, recorded {wanted!r}")
    return differences


def _recorded(response: dict[str, object]) -> tuple[str, object]:
    if "refused" in response:
        refused = response["refused"]
        return ("refused", refused.get("code") if isinstance(refused, dict) else None)
    if "unsupported" in response:
        return ("unsupported", response["unsupported"])
    return ("result", response.get("result"))

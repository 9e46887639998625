"""The crash campaign over the protocol (SPEC.md section 18.4, level ``store``): the
driver's process killed while it serves a request, then reopened, checked against the
model's permitted states, and recovered.

Rules of this file: the scripts are the crash simulator's scenarios
(:data:`runstore.crashsim.scenarios.SCENARIOS`) that use only protocol operations. For each
scenario one run without kills measures each step's duration; then each step is killed
``kills`` times, after a delay drawn uniformly from [0, its duration) (a seeded
generator, so a campaign repeats), on a fresh root with the setup replayed. After a kill a
new process opens the root: its projection must be the model's before the step, after it,
or between two of its transactions (a publication commits more than one), and a recovery
pass past every expiry must then give the model's report and projection.
"""

from __future__ import annotations

import random
import tempfile
import time

from runstore import model as m
from runstore.crashsim.scenarios import SCENARIOS
from runstore.crashsim.scenarios import Scenario
from runstore.testing.disk import disk_view
from runstore.testing.lockstep import ModelWriter
from runstore.testing.lockstep import outcome
from runstore.testing.publishing import ClockScript
from runstore.testing.script import Call
from runstore.testing.script import Context

from .calls import request_of
from .cases import Drivers
from .client import ProtocolFailure
from .pair import Mismatch
from .pair import Pair
from .pair import TokenQueue
from .pair import Unsupported
from .pair import new_stage_tokens
from .report import FAIL
from .report import NOT_IMPLEMENTED
from .report import PASS
from .report import Check


def eligible() -> list[Scenario]:
    """The scenarios whose every step is a protocol operation (no batch, no store-only
    action, a store already created)."""
    return [
        scenario
        for scenario in SCENARIOS.values()
        if scenario.initialized
        and scenario.steps
        and all(
            step.store_action is None and step.call.operation != "apply_batch"
            for step in (*scenario.setup, *scenario.steps)
        )
    ]


def _setup(pair: Pair, scenario: Scenario, context: Context) -> None:
    pair.open()
    for step in scenario.setup:
        pair.apply(step.call, context)


def _measure(drivers: Drivers, scenario: Scenario) -> list[float]:
    """Each step's duration, served without kills (and checked in lockstep)."""
    durations = []
    with tempfile.TemporaryDirectory(prefix="runstore-kit-crash-") as root:
        pair, context = Pair(drivers.current(), root), Context()
        _setup(pair, scenario, context)
        for step in scenario.steps:
            start = time.monotonic()
            pair.apply(step.call, context)
            durations.append(time.monotonic() - start)
        pair.check_projection(scenario.name)
        pair.expect_result("close", {})
    return durations


def permitted(
    state: m.ModelState, call: Call, context: Context, seen: m.DiskView, tokens: list[str]
) -> list[m.ModelState]:
    """The states a kill during ``call`` may leave: before it, and each state the model
    moves to while making it (the last is after it)."""
    queue = TokenQueue()
    queue.pending = list(tokens)
    model = ModelWriter(state, tokens=queue, disk=lambda _: seen)
    outcome(lambda: call.invoke(model, dict(context)))
    return [state, *model.trail]


def _latest(state: m.ModelState) -> int:
    expiries = [lease.expires_at_ns for lease in state.leases.values()]
    return max([*expiries, 1_000_000]) + 1


def kill_trial(drivers: Drivers, scenario: Scenario, index: int, delay: float) -> str:
    """One kill during step ``index`` after ``delay`` seconds; returns what the recovered
    store showed (``before``, ``after`` or ``between``). Raises Mismatch otherwise."""
    with tempfile.TemporaryDirectory(prefix="runstore-kit-crash-") as root:
        pair, context = Pair(drivers.fresh(), root), Context()
        _setup(pair, scenario, context)
        for step in scenario.steps[:index]:
            pair.apply(step.call, context)
        call = scenario.steps[index].call
        before = pair.model.state
        seen = disk_view(root, before)
        guard = context.get(call.attempt) if call.attempt is not None else None
        op, args = request_of(call, guard)
        pair.driver.send(op, args)
        time.sleep(delay)
        drivers.end()
        pair = Pair(drivers.fresh(), root, before)
        pair.open()
        found = pair.projection()
        states = permitted(before, call, context, seen, new_stage_tokens(found, before))
        matches = [s for s in states if pair.model_projection(s) == found]
        if not matches:
            raise Mismatch(
                f"{scenario.name}: killed {delay * 1000:.1f} ms into {call.name}: the store "
                "reopened in a state the model never passes through"
            )
        where = (
            "before" if matches[0] is before else "after" if matches[0] is states[-1] else "between"
        )
        pair = Pair(pair.driver, root, matches[0])
        pair.apply(
            Call("recover", "recover", {"clock": ClockScript(samples=(_latest(matches[0]),))}), {}
        )
        pair.check_projection(f"recovery after a kill in {call.name}")
        pair.expect_result("close", {})
    return where


def crash_campaign(
    drivers: Drivers, *, kills: int, seed: int = 0, names: tuple[str, ...] = ()
) -> Check:
    """The campaign as one check (``crash campaign``): every eligible scenario (or those
    ``names``), every step, ``kills`` kills each."""
    check = Check("crash campaign")
    generator = random.Random(seed)
    landed: dict[str, int] = {"before": 0, "after": 0, "between": 0}
    for scenario in eligible():
        if names and scenario.name not in names:
            continue
        try:
            durations = _measure(drivers, scenario)
            for index, duration in enumerate(durations):
                for _ in range(kills):
                    delay = generator.uniform(0, duration)
                    landed[kill_trial(drivers, scenario, index, delay)] += 1
                    check.cases += 1
        except (Mismatch, ProtocolFailure) as failure:
            drivers.end()
            check.status = NOT_IMPLEMENTED if isinstance(failure, Unsupported) else FAIL
            check.detail = f"scenario {scenario.name!r}: {failure}"
            break
    if check.status == PASS:
        check.detail = ", ".join(f"{count} {where}" for where, count in landed.items())
    drivers.end()
    return check

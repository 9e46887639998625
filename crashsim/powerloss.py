"""The power-loss method: run a scenario once, photographing the store root at every
boundary and after every persistence effect, and check every on-disk state a power cut
could leave at each chosen cut.

How. The reference is recorded with the durability seam's persistence effects in its
trace (:data:`runstore.durable.Recorder`). One child runs the scenario under the image
method's stops (:func:`runstore.crashsim.images.stop_at`), stopping at every boundary and
right after every effect (:func:`~runstore.crashsim.tracer.effect_stop`); the parent
photographs the root by inode (:func:`~runstore.crashsim.persistence.photograph`) and
feeds :class:`~runstore.crashsim.persistence.Disk`, which keeps each file's and
directory's durable version (an effect is applied with the photograph taken right after
it). At each chosen cut (a boundary, an effect of a chosen step, or the end of the run)
the parent asks the disk what a power cut may leave (:meth:`Disk.cut`), builds each state,
and has a trial child check it (:func:`runstore.crashsim.powerloss_check.check_state_body`):
reopen, recover, the model's acceptable states (at an effect, those of the boundary before
it), every completed object, the user's continuation, and on a failure whether an
acknowledged result was lost. States whose trees are identical at cuts with the same
acceptable states are checked once.

The first failing state (one that lost an acknowledged result first, then one that lost a
committed result, then the earliest cut) is then shrunk: each undone item is put back in
turn while the state still fails, and what remains, with the persistence events up to the
cut that touched it (the seam's effects and the file creations and writes the photographs
show), is the report (``shrunk``).

Rules of this file: the parent never opens a connection; every state is checked in its own
child. The database's bytes are read only at the safe points SQLite's guarantee names and
at the cuts (see :mod:`runstore.crashsim.persistence`).
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Final

import attrs
from runstore.crashsim import processes
from runstore.crashsim import trials
from runstore.crashsim.harness import remove_missing_root
from runstore.crashsim.images import Digests
from runstore.crashsim.images import Tree
from runstore.crashsim.images import stop_at
from runstore.crashsim.images import write_tree
from runstore.crashsim.persistence import Cut
from runstore.crashsim.persistence import Disk
from runstore.crashsim.photographs import PARENT_PREFIX
from runstore.crashsim.photographs import ROOT_PREFIX
from runstore.crashsim.photographs import STORE
from runstore.crashsim.photographs import Photo
from runstore.crashsim.photographs import database_files
from runstore.crashsim.photographs import photograph
from runstore.crashsim.photographs import photograph_parent
from runstore.crashsim.powerloss_check import LOST
from runstore.crashsim.powerloss_check import LOST_COMMIT
from runstore.crashsim.powerloss_check import CutPoint
from runstore.crashsim.powerloss_check import check_state_body
from runstore.crashsim.powerloss_check import exported_files
from runstore.crashsim.results import Finding
from runstore.crashsim.results import SweepResult
from runstore.crashsim.sweep import Sweep
from runstore.crashsim.tracer import Entry
from runstore.crashsim.tracer import describe
from runstore.crashsim.tracer import effect_number
from runstore.crashsim.tracer import effect_stop
from runstore.store.recovery.disk import QUARANTINE_NAME

END: Final = -1
"""The cut after the last step returned and the store was closed."""


@attrs.frozen
class PowerLoss:
    """The power-loss method: cut the power at the chosen boundaries (and their steps'
    persistence effects) and at the end, checking at most ``limit`` states per cut (all
    when a cut has no more; else a sample seeded with ``seed``); with ``shrink``, the first
    failure is shrunk."""

    name = "powerloss"
    persistence = True
    limit: int
    seed: int = 0
    shrink: bool = True
    caps: Mapping[str, int] = attrs.field(factory=dict)
    """Scenario name -> at most this many states per cut (see
    :meth:`~runstore.crashsim.persistence.Cut.choices`)."""

    def run(self, sweep: Sweep, chosen: Sequence[int]) -> SweepResult:
        cap = self.caps.get(sweep.scenario.name)
        cuts = _Cuts(sweep, chosen, self.limit, self.seed, cap)
        cuts.run()
        if self.shrink and cuts.first_failure is not None:
            cuts.shrink()
        return sweep.result(
            cuts.results(), cuts=cuts.cut_count, sampled=cuts.sampled, shrunk=cuts.shrunk
        )


def safe_points(reference: Sequence[Entry]) -> set[int]:
    """The boundaries right after a statement that committed outside a transaction (a
    COMMIT, or a write in autocommit): where SQLite has made the database durable."""
    safe: set[int] = set()
    inside = False
    for entry in reference:
        if entry[0] != "b" or entry[2] != "after" or entry[3] != "sql":
            continue
        text = str(entry[4]).upper()
        if text.startswith("BEGIN"):
            inside = True
        elif text.startswith(("COMMIT", "ROLLBACK")):
            inside = False
            safe.add(int(str(entry[1])))
        elif not inside and not text.startswith("SELECT"):
            safe.add(int(str(entry[1])))
    return safe


def effects_of(reference: Sequence[Entry]) -> list[tuple[int, Entry]]:
    """Each persistence effect of the reference, in order, with the boundary before it
    (the "before" boundary of the operation that made it)."""
    found: list[tuple[int, Entry]] = []
    last = -1
    for entry in reference:
        if entry[0] == "b":
            last = int(str(entry[1]))
        elif entry[0] == "p":
            found.append((last, entry[1:]))
    return found


@attrs.define
class _State:
    number: int
    cut: CutPoint
    where: str
    undone: tuple[str, ...]
    choice: tuple[int, ...]
    items: Cut
    logged: int
    """How many events of the sweep's log had happened at the cut."""
    copies: int = 1


class _Cuts:
    def __init__(
        self, sweep: Sweep, cuts: Sequence[int], limit: int, seed: int, cap: int | None
    ) -> None:
        self.sweep, self.model, self.points = sweep, sweep.run, sweep.points
        self.cuts = frozenset(cuts)
        self.cut_count = len(self.cuts) + 1
        self.limit, self.seed, self.cap = limit, seed, cap
        self.safe = safe_points(sweep.reference)
        self.effects = effects_of(sweep.reference)
        self.effect_cuts = frozenset(
            n for n, (k, _) in enumerate(self.effects) if k in self.cuts or k + 1 in self.cuts
        )
        self.cut_count += len(self.effect_cuts)
        self.checks = trials.Checks(sweep.jobs, self._body_of, self._trial, self._collect)
        self.digests = Digests()
        self.disk: Disk | None = None
        self.states: list[_State] = []
        self.checked: dict[tuple[object, ...], _State] = {}
        self.findings: dict[int, tuple[str, str]] = {}
        self.mismatches: list[Finding] = []
        self.first_failure: _State | None = None
        self.shrunk = ""
        self.sampled = 0
        self.exported: dict[str, bytes] | None = None
        """An export directory's files at the end of the run, when there is one."""
        self.log: list[tuple[int, str, tuple[str, ...]]] = []
        """Each persistence event up to now, with the boundary it precedes: the photographs'
        file creations and writes, then the seam's recorded effects."""

    def run(self) -> None:
        mismatches = stop_at(
            self.sweep,
            [*range(len(self.points)), *map(effect_stop, range(len(self.effects)))],
            self._stopped,
            self.checks.service,
            on_start=self._started,
            on_end=self._ended,
        )
        for stop, detail in sorted(mismatches.items()):
            k = stop if stop >= 0 else self.effects[effect_number(stop)][0]
            where = describe(self.points[k].entry) if stop >= 0 else self._after(stop)
            self.mismatches.append(
                self._finding(CutPoint(self.points[k]), where, "mismatch", detail)
            )
        self.checks.drain()
        failed = [s for s in self.states if self.findings[s.number][0] != "ok"]
        lost = [s for s in failed if self.findings[s.number][1].startswith(LOST)]
        committed = [s for s in failed if self.findings[s.number][1].startswith(LOST_COMMIT)]
        if failed:
            self.first_failure = min(lost or committed or failed, key=_earliest)

    def results(self) -> list[Finding]:
        """A finding per distinct state, in the order they were cut, then the mismatches."""
        states = [
            self._finding(
                state.cut, state.where, *self.findings[state.number], state.undone, state.copies
            )
            for state in self.states
        ]
        return states + self.mismatches

    def _finding(
        self,
        cut: CutPoint,
        where: str,
        status: str,
        detail: str,
        undone: tuple[str, ...] | None = None,
        copies: int = 1,
    ) -> Finding:
        step = cut.step(self.model)
        return Finding(
            scenario=self.sweep.scenario.name,
            k=cut.k,
            status=status,
            boundary=where,
            operation=f"step {step} ({self.model.names[step]})",
            detail=detail,
            undone=undone,
            copies=copies,
        )

    def _after(self, stop: int) -> str:
        """Where the child stops right after effect ``effect_number(stop)``."""
        n = effect_number(stop)
        k, effect = self.effects[n]
        what = " ".join(str(part) for part in effect)
        return f"{describe(self.points[k].entry)}, after its effect #{n}: {what}"

    # --- the imaging run ---------------------------------------------------------------

    def _photograph(self, live: str) -> Photo:
        """The store root whole, or its parent as far as the run reaches it (a scenario
        that makes directories beside its root)."""
        return photograph_parent(live) if self.sweep.scenario.parent else photograph(live)

    def root_of(self, trial: str) -> str:
        """Where a state's store root is written in ``trial`` (under ``base/`` when the
        root's parent is modelled)."""
        if self.sweep.scenario.parent:
            return os.path.join(trial, "base", STORE)
        return os.path.join(trial, "store")

    def _write(self, tree: Tree, trial: str) -> None:
        top = self.root_of(trial)
        write_tree(tree, os.path.dirname(top) if self.sweep.scenario.parent else top)

    def _started(self, live: str) -> None:
        scenario = self.sweep.scenario
        remove_missing_root(scenario, live)
        store = STORE if scenario.parent else ""
        photo = self._photograph(live)
        self.disk = Disk(photo, database_files(live), scenario.unsynced, store=store)

    def _stopped(self, stop: int, live: str) -> None:
        """At a boundary (``stop`` >= 0) or right after a persistence effect (negative)."""
        assert self.disk is not None
        if stop < 0:
            n = effect_number(stop)
            k, effect = self.effects[n]
            cut = n in self.effect_cuts
            database = database_files(live) if cut else None
            derived = self.disk.observe(self._photograph(live), [effect], database)
            self._log(k + 1, derived, [effect])
            if cut:
                self._cut(CutPoint(self.points[k]), self._after(stop))
            return
        wanted = stop in self.safe or stop in self.cuts
        database = database_files(live) if wanted else None
        derived = self.disk.observe(self._photograph(live), [], database, safe=stop in self.safe)
        self._log(stop, derived, [])
        if stop in self.cuts:
            self._cut(CutPoint(self.points[stop]), describe(self.points[stop].entry))

    def _ended(self, live: str, status: int) -> None:
        if self.disk is None or status != 0:
            return
        derived = self.disk.observe(self._photograph(live), [], database_files(live))
        self.exported = exported_files(live)
        self._log(len(self.points), derived, [])
        self._cut(CutPoint(None), "the end of the run (every step returned, store closed)")

    def _normalized(self, path: str) -> str:
        """A photographed path as the seam's effects name it (``$ROOT/...``; with the
        root's parent modelled, ``$PARENT/...`` and ``$ROOT.export/...`` too)."""
        if not self.sweep.scenario.parent:
            return f"{ROOT_PREFIX}/{path}" if path else ROOT_PREFIX
        if path == STORE or path.startswith((f"{STORE}/", f"{STORE}.")):
            return ROOT_PREFIX + path[len(STORE) :]
        return f"{PARENT_PREFIX}/{path}" if path else PARENT_PREFIX

    def _log(self, k: int, derived: Sequence[tuple[str, str]], effects: Sequence[Entry]) -> None:
        for event, path in derived:
            self.log.append((k, event, (self._normalized(path),)))
        for effect, *paths in effects:
            self.log.append((k, str(effect), tuple(str(path) for path in paths)))

    def _cut(self, cut: CutPoint, where: str) -> None:
        assert self.disk is not None
        items = self.disk.cut()
        self.sampled += items.count() > min(self.limit, self.cap or self.limit)
        acceptable = tuple(label for label, _ in cut.acceptable(self.model))
        step = cut.step(self.model)
        for choice in items.choices(self.limit, self.seed + cut.k, self.cap):
            tree = items.materialize(choice)
            key = (self.digests.tree(tree), step, acceptable, cut.point is None)
            known = self.checked.get(key)
            if known is not None:
                known.copies += 1
                continue
            undone = tuple(
                item.what + ("" if len(item.options) < 3 else f" (option {option})")
                for item, option in zip(items.items, choice, strict=True)
                if option
            )
            state = _State(
                len(self.states), cut, where, undone, tuple(choice), items, len(self.log)
            )
            self.states.append(state)
            self.checked[key] = state
            trial = self._trial(state)
            os.mkdir(trial, 0o700)
            self._write(tree, trial)
            self.checks.add(state)
            self.checks.service()

    # --- checking ----------------------------------------------------------------------

    def _trial(self, state: _State) -> str:
        return self.sweep.trial(f"s{state.number}")

    def _body_of(self, state: _State) -> Callable[[], int]:
        return self._body(state, self._trial(state))

    def _body(self, state: _State, trial: str) -> Callable[[], int]:
        """The trial child's body checking the state written in ``trial``."""
        return functools.partial(
            check_state_body,
            self.sweep.scenario,
            self.model,
            state.cut,
            self.root_of(trial),
            os.path.join(trial, "result.json"),
            self.exported if state.cut.point is None else None,
            self._secured(state),
        )

    def _secured(self, state: _State) -> tuple[str, ...]:
        """The stages (store paths) a quarantine rename moved before ``state``'s cut whose
        destination directory was synced after the rename: from then on the stage must
        never be lost (:func:`~runstore.crashsim.powerloss_check.quarantine_problem`)."""
        pending: dict[str, set[str]] = {}
        secured: set[str] = set()
        for _, event, targets in self.log[: state.logged]:
            if event == "rename" and f"/{QUARANTINE_NAME}/" in targets[1]:
                source = targets[0].removeprefix(f"{ROOT_PREFIX}/")
                pending.setdefault(os.path.dirname(targets[1]), set()).add(source)
            elif event == "fsync_dir" and targets[0] in pending:
                secured |= pending.pop(targets[0])
        return tuple(sorted(secured))

    def _collect(self, state: _State, status: int) -> None:
        self.findings[state.number] = _verdict(self._trial(state), status)

    # --- shrinking ---------------------------------------------------------------------

    def shrink(self) -> None:
        """Put back each undone item of the first failure while the state still fails;
        report what remains and the persistence effects that touched it."""
        state = self.first_failure
        assert state is not None
        choice = list(state.choice)
        detail = self.findings[state.number][1]
        for index in range(len(choice)):
            if choice[index] == 0:
                continue
            trial = [*choice[:index], 0, *choice[index + 1 :]]
            status, found = self._check_now(state, tuple(trial))
            if status != "ok":
                choice, detail = trial, found
        items = [
            (item, option) for item, option in zip(state.items.items, choice, strict=True) if option
        ]
        undone = [item.what for item, _ in items] or ["nothing (the page cache's own state)"]
        assert self.disk is not None
        paths = sorted(set().union(*(self.disk.aliases(item) for item, _ in items)))
        touched = _touching(self.log[: state.logged], [self._normalized(p) for p in paths])
        self.shrunk = "\n".join(
            [
                f"cut at {state.where} ({len(state.undone)} items undone, shrunk to {len(items)})",
                f"  undone: {'; '.join(undone)}",
                "  operations (persistence effects touching them, in order):",
                *(f"    {line}" for line in touched or ["(none recorded)"]),
                f"  found: {detail}",
            ]
        )

    def _check_now(self, state: _State, choice: tuple[int, ...]) -> tuple[str, str]:
        trial = self.sweep.trial("shrinking")
        shutil.rmtree(trial, ignore_errors=True)
        os.mkdir(trial, 0o700)
        self._write(state.items.materialize(choice), trial)
        status = processes.run(self._body(state, trial), trial + ".error")
        return _verdict(trial, status)


def _earliest(state: _State) -> tuple[bool, int, int]:
    return state.cut.k == END, state.cut.k, state.number


def _verdict(trial: str, status: int) -> tuple[str, str]:
    """The status and detail of the trial in ``trial`` (then removed)."""
    found = trials.found(trial, status)
    return str(found["status"]), str(found.get("detail", ""))


def _touching(log: Sequence[tuple[int, str, tuple[str, ...]]], paths: Sequence[str]) -> list[str]:
    """The persistence events of ``log`` whose paths name one of ``paths`` (normalized as
    the seam's effects are) or the directory holding one, numbered in order (``@k``: the
    boundary the event precedes)."""
    wanted = set(paths)
    wanted |= {os.path.dirname(path) for path in wanted}
    return [
        f"#{number} @k={k} {event} {' -> '.join(targets)}"
        for number, (k, event, targets) in enumerate(log, 1)
        if any(target in wanted for target in targets)
    ]

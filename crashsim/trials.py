"""What the methods share about trials: checking one crashed store against its point's
acceptable states, running trial children at most ``jobs`` at a time, and reading a
trial's finding back.

Rules of this file: the functions named ``*_body`` run in forked children and report
through files (a JSON finding per trial, with the trial's :class:`Phases`); the others run
in the sweep's parent, which never opens a connection or reads a live store. A trial
directory is ``<base>/<name>`` (``k<k>`` for a boundary's): the crashed store in ``store``,
the finding in ``result.json``, and a child's traceback next to it in ``<name>.error``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from typing import Final
from typing import Generic
from typing import TypeVar

from runstore.crashsim import processes
from runstore.crashsim.continuation import Resumption
from runstore.crashsim.harness import ModelRun
from runstore.crashsim.points import Point
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.timing import Phases
from runstore.crashsim.verify import Acceptable
from runstore.crashsim.verify import verify
from runstore.store.store_root import create_root

WAITING_PER_JOB: Final = 4
"""How many trials may wait per job before :meth:`Checks.service` blocks on one ending."""
T = TypeVar("T")


def check_point_body(
    scenario: Scenario, run: ModelRun, root: str, point: Point, result_path: str, phases: Phases
) -> int:
    """Child body: check the crashed store at ``root`` against ``point``'s acceptable
    states (resuming the crashed step first, for a publication scenario; running
    ``--init`` again first, for a scenario that creates its root)."""
    if scenario.creates_root:
        create_root(root)
    choices = point.choices(run.transactions)
    resumption = None
    if scenario.resume:
        resumption = Resumption.of(scenario, run, point.op_index, [d for _, d in choices])
    acceptable = point.acceptable(run.transactions)
    return verify_body(root, acceptable, result_path, resumption, run.published, phases)


def verify_body(
    root: str,
    acceptable: Acceptable,
    result_path: str,
    resumption: Resumption | None = None,
    published: tuple[str, ...] = (),
    phases: Phases | None = None,
) -> int:
    """Child body: :func:`~runstore.crashsim.verify.verify` and write the finding."""
    timing = phases if phases is not None else Phases()
    verdict = verify(root, acceptable, resumption, published, timing)
    status = "ok" if verdict.ok else "failure"
    write(
        result_path,
        {
            "status": status,
            "matched": verdict.matched,
            "detail": verdict.detail,
            "phases": timing.to_json(),
        },
    )
    return 0


def found(trial: str, status: int) -> dict[str, object]:
    """The finding the trial in directory ``trial`` wrote (the directory is then removed);
    a trial that wrote none, ended with exit status ``status``, is a failure naming its
    status and last error."""
    finding = load(os.path.join(trial, "result.json"))
    shutil.rmtree(trial, ignore_errors=True)
    if finding:
        return finding
    error = read_last_line(trial + ".error")
    return {"status": "failure", "detail": f"the trial process ended with {status}: {error}"}


class Checks(Generic[T]):
    """Trial children, at most ``jobs`` at once, one per item added: ``body(item)`` runs in
    the child (its traceback in ``trial_of(item) + ".error"``) and ``done(item, status)`` is
    called in the parent as each ends."""

    def __init__(
        self,
        jobs: int,
        body: Callable[[T], Callable[[], int]],
        trial_of: Callable[[T], str],
        done: Callable[[T, int], None],
    ) -> None:
        self._pool: processes.Pool[T] = processes.Pool(jobs)
        self._waiting: list[T] = []
        self._body, self._trial_of, self._done = body, trial_of, done

    def add(self, item: T) -> None:
        """Queue ``item``'s trial; it starts at the next :meth:`service` or :meth:`drain`."""
        self._waiting.append(item)

    def service(self) -> None:
        """Collect the trials that ended, start waiting ones, and while at least
        :data:`WAITING_PER_JOB` per job still wait, block on trials ending (a stopped
        execution stays stopped meanwhile, so the copies waiting on disk stay bounded)."""
        ended = self._pool.reap(0)
        while ended is not None:
            self._done(*ended)
            ended = self._pool.reap(0)
        self._start_waiting()
        while len(self._waiting) >= WAITING_PER_JOB * self._pool.jobs:
            self._done(*self._pool.wait_any())
            self._start_waiting()

    def drain(self) -> None:
        """Run every waiting trial and wait for every trial to end."""
        while self._waiting or len(self._pool):
            self._start_waiting()
            self._done(*self._pool.wait_any())

    def _start_waiting(self) -> None:
        while self._waiting and not self._pool.full():
            item = self._waiting.pop(0)
            self._pool.start(self._body(item), item, self._trial_of(item) + ".error")


def write(path: str, value: dict[str, object]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(value, handle)


def load(path: str) -> dict[str, object]:
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except (FileNotFoundError, ValueError):
        return {}
    return {str(key): item for key, item in value.items()}


def read_last_line(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip().splitlines()[-1]
    except (FileNotFoundError, IndexError):
        return "(no error recorded)"

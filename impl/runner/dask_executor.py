"""The Dask executor: each work order runs as one Dask task on a worker of a cluster.

Rules of this file: the coordinator's side of Dask; it never touches a store and knows
nothing of attempts beyond the :class:`WorkOrder`. ``distributed`` is imported only here
and in :mod:`runstore.runner.dask_task`, and only when a Dask executor is made, so the core
install does not need it (``pip install 'runstore[dask]'``). Orders and results travel as
values; only the coordinator publishes (SPEC.md section 15, "The Dask executor").

Dask never runs an attempt's command twice. Every task is submitted with ``retries=0``
and the scheduler must have ``allowed-failures`` 0 (a task whose worker dies while it runs
errs with ``KilledWorker`` instead of being run again). A finished task's result is
released from the cluster as soon as it was fetched, so no lost worker can make the
scheduler compute it again; and a task the scheduler does run again (a worker holding a
result that was not yet fetched died) finds its start mark set and refuses to start its
command (:mod:`runstore.runner.dask_task`). Each task is admitted only while its serial
is live in the channel Variable that a background thread also beats: a cancel, a fetched
result or the close takes it out for good. Any retry is an explicit store authorization.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import secrets
import threading
import time
from collections.abc import Collection
from typing import TYPE_CHECKING
from typing import Any
from typing import Final

from runstore.errors import ExecutorUnavailableError
from runstore.runner.dask_task import Channel
from runstore.runner.dask_task import run_task
from runstore.runner.dask_task import start_mark_name
from runstore.runner.environment import runstore_version
from runstore.runner.executor import Executor
from runstore.runner.executor import WorkHandle
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus
from runstore.runner.scratch_run import unrun

CONNECT_TIMEOUT_S: Final = 10.0
"""How long to try reaching a scheduler, and to wait for its first worker."""

POLL_S: Final = 0.5
"""How often a running task reads the channel."""


class DaskHandle:
    """One order submitted to a :class:`DaskExecutor` (a :class:`WorkHandle`): its Dask
    ``key``, its channel ``serial`` and its Dask ``future``. It is done once the task's
    result was fetched from the worker (by the executor's fetch threads, off the
    coordinator's thread) or once it was cancelled. ``returned`` is what the task itself
    returned (WORKER_LOST if nothing came back), once fetched, even after a cancel."""

    def __init__(self, executor: DaskExecutor, key: str, serial: int, future: Any) -> None:
        self.executor, self.key, self.serial, self.future = executor, key, serial, future
        self.cancelled = False
        self.returned: WorkResult | None = None

    def done(self) -> bool:
        return self.cancelled or self.returned is not None

    def result(self) -> WorkResult:
        """The result; once cancelled before it was fetched, CANCELLED (whatever the task
        may still return). Raises RuntimeError if not done yet."""
        if self.cancelled:
            return unrun(WorkStatus.CANCELLED, "cancelled by the coordinator")
        if self.returned is None:
            raise RuntimeError(f"task {self.key} is not done")
        return self.returned

    def cancel(self) -> None:
        """Take the task's serial out of the channel's live ones (a running task kills its
        worker's process group, one not started never starts); from now on the handle is
        done with a CANCELLED result. Nothing once the result is here; never blocks."""
        if self.cancelled or self.returned is not None:
            return
        self.cancelled = True
        self.executor.withdraw(self)


def _settled(future: Any) -> WorkResult:
    """A finished future's WorkResult; a task that erred or that the scheduler dropped is
    WORKER_LOST with a one-line detail (never an exception)."""
    from distributed.scheduler import KilledWorker

    status = future.status
    if status == "finished":
        try:
            value = future.result(timeout=CONNECT_TIMEOUT_S)
        except Exception as error:
            return unrun(WorkStatus.WORKER_LOST, f"result not fetched: {_one_line(error)}")
        if isinstance(value, WorkResult):
            return value
        return unrun(WorkStatus.WORKER_LOST, f"the task returned a {type(value).__name__}")
    if status == "error":
        raised = future.exception(timeout=CONNECT_TIMEOUT_S)
        if isinstance(raised, KilledWorker):
            return unrun(WorkStatus.WORKER_LOST, "the Dask worker running it died")
        return unrun(WorkStatus.WORKER_LOST, f"the Dask task failed: {_one_line(raised)}")
    return unrun(WorkStatus.WORKER_LOST, f"the Dask scheduler dropped the task ({status})")


def _one_line(error: BaseException) -> str:
    text = str(error).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {first}"[:300]


class DaskExecutor:
    """Runs orders as Dask tasks through ``client`` (owning ``cluster`` if given, closed
    with it). A task whose coordinator stays silent for ``orphan_after_s`` kills its
    worker (the CLI passes the campaign's lease duration: by then the lease is lost).
    Use :func:`open_dask` to make one; :meth:`close` is idempotent.

    A handle's life in the cluster: :meth:`submit` gives it the next serial, live at once
    (the next publication lists it); its cancel or its fetched result takes the serial out
    of ``live``; once a publication without it has reached the scheduler, its future is
    released and its start mark cleared (:meth:`_clean`), in that order, so that no run of
    its task can be admitted after the mark is gone."""

    def __init__(
        self,
        client: Any,
        *,
        cluster: Any = None,
        orphan_after_s: float,
        kill_grace_s: float = 2.0,
        poll_s: float = POLL_S,
    ) -> None:
        if not orphan_after_s > 0 or not poll_s > 0 or kill_grace_s < 0:
            raise ValueError(
                "orphan_after_s and poll_s must be positive, kill_grace_s not negative"
            )
        from distributed import Variable

        self.client, self.cluster = client, cluster
        self.orphan_after_s, self.kill_grace_s, self.poll_s = orphan_after_s, kill_grace_s, poll_s
        self.name = f"runstore-channel-{secrets.token_hex(8)}"
        self.beat_s = min(1.0, orphan_after_s / 4)
        self._variable = Variable(self.name, client=client)
        self._lock = threading.Lock()
        self._wake = threading.Event()  # a handle finished, or the channel must be published
        self._next_serial = 0
        self._live: set[int] = set()
        """The serials of the tasks this coordinator holds: submitted, neither cancelled nor
        fetched, and not closed."""
        self._unsettled: dict[str, DaskHandle] = {}
        """Handles whose task has not finished, or whose result is still being fetched."""
        self._retiring: list[DaskHandle] = []
        """Handles out of ``_live`` whose task is over, to clean after the next publication."""
        self._held: dict[str, DaskHandle] = {}
        """Handles not cleaned yet: their future is held, their start mark may be set."""
        self._fetcher = concurrent.futures.ThreadPoolExecutor(4, "runstore-fetch")
        self.version = runstore_version()
        self._beat = 0
        self._closed = False
        self.publish_failures = 0
        self.clean_failures = 0
        self._publish()  # before any task can read it
        self._stop = threading.Event()
        self._publish_now = threading.Event()
        self._beater = threading.Thread(target=self._beat_loop, name="runstore-beat", daemon=True)
        self._beater.start()

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def threads(self) -> int:
        """How many tasks the cluster runs at once now (its workers' threads)."""
        return sum(self.client.nthreads().values())

    def submit(self, order: WorkOrder) -> DaskHandle:
        with self._lock:
            if self._closed:
                raise RuntimeError("submit on a closed DaskExecutor")
            serial = self._next_serial
            self._next_serial += 1
            self._live.add(serial)
        key = f"runstore-{order.key}-{secrets.token_hex(4)}"
        channel = Channel(
            name=self.name,
            key=key,
            serial=serial,
            orphan_after_s=self.orphan_after_s,
            poll_s=self.poll_s,
            kill_grace_s=self.kill_grace_s,
            version=self.version,
        )
        try:
            future = self.client.submit(run_task, order, channel, key=key, pure=False, retries=0)
        except BaseException:
            with self._lock:
                self._live.discard(serial)
            raise
        handle = DaskHandle(self, key, serial, future)
        with self._lock:
            self._unsettled[key] = handle
            self._held[key] = handle
        self._publish_now.set()  # the task waits for a publication that lists it
        future.add_done_callback(lambda _: self._on_done(handle))
        return handle

    def wait(self, handles: Collection[WorkHandle], timeout_s: float) -> set[WorkHandle]:
        """The done ones among ``handles`` once one is done or ``timeout_s`` passed.
        Refuses (TypeError) a handle this executor did not make."""
        for handle in handles:
            if not isinstance(handle, DaskHandle) or handle.executor is not self:
                raise TypeError(f"not a handle of this DaskExecutor: {handle!r}")
        deadline = time.monotonic() + timeout_s
        while True:
            self._wake.clear()
            done: set[WorkHandle] = {handle for handle in handles if handle.done()}
            remaining = deadline - time.monotonic()
            if done or remaining <= 0:
                return done
            self._wake.wait(remaining)

    def withdraw(self, handle: DaskHandle) -> None:
        """Take ``handle``'s serial out of the live ones and publish soon (never blocks)."""
        with self._lock:
            self._live.discard(handle.serial)
        self._publish_now.set()

    def close(self) -> None:
        """Cancel every handle not done and publish ``closed`` (every running task kills its
        worker, none starts), wait a bounded time for the tasks to end and for the fetches
        under way (fetched results stay readable), clean every handle (once ``closed``
        reached the scheduler), then close the client and the cluster it owns;
        idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._live.clear()
            unsettled = list(self._unsettled.values())
        for handle in unsettled:
            if not handle.done():
                handle.cancelled = True
        self._stop.set()
        self._publish_now.set()
        self._beater.join()
        published = self._publish()
        deadline = time.monotonic() + 2 * self.poll_s + self.kill_grace_s + 2.0
        while self._unsettled and time.monotonic() < deadline:
            time.sleep(0.05)
        self._fetcher.shutdown(wait=True)  # every fetch ends before the client closes
        if published:  # else a mark cleared now could admit a run that read an older value
            self._clean(list(self._held.values()))
        with contextlib.suppress(Exception):
            self._variable.delete()
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    def _on_done(self, handle: DaskHandle) -> None:
        """A future's done callback. Dask runs them all on one shared thread, so the fetch
        goes to this executor's own pool; once :meth:`close` shut that down, every handle
        not done was cancelled and nothing is fetched."""
        try:
            self._fetcher.submit(self._fetch, handle)
        except RuntimeError:  # the pool is shut down: closing
            with self._lock:
                self._unsettled.pop(handle.key, None)

    def _fetch(self, handle: DaskHandle) -> None:
        """Fetch a finished task's result (a fetch thread), take its serial out of the live
        ones and queue the handle for cleaning, then wake :meth:`wait`."""
        try:
            handle.returned = _settled(handle.future)
        except Exception as error:  # a handle must always finish; the attempt then fails
            handle.returned = unrun(WorkStatus.WORKER_LOST, f"not fetched: {_one_line(error)}")
        finally:
            with self._lock:
                self._unsettled.pop(handle.key, None)
                self._live.discard(handle.serial)
                self._retiring.append(handle)
            self._publish_now.set()
            self._wake.set()

    def _beat_loop(self) -> None:
        """Publish every ``beat_s``, and at once when a submit, a cancel or a fetch asks;
        after each publication that reached the scheduler, have the handles it retired
        cleaned (on the fetch pool: a slow scheduler must not delay the beat). Stop when
        closing."""
        while True:
            self._publish_now.wait(self.beat_s)
            self._publish_now.clear()
            if self._stop.is_set():
                return
            with self._lock:
                retired, self._retiring = self._retiring, []
            if not self._publish():
                with self._lock:
                    self._retiring[:0] = retired
            elif retired:
                with contextlib.suppress(RuntimeError):  # the pool is shut: close cleans them
                    self._fetcher.submit(self._clean, retired)

    def _publish(self) -> bool:
        """Set the channel to the current beat, listed serials, live serials and closed
        flag; whether it reached the scheduler. A failure (scheduler unreachable) is counted,
        not raised: the tasks then see silence and the orphan rule stops them; the store's
        fencing does not depend on the channel."""
        with self._lock:
            state = {
                "beat": self._beat,
                "listed": self._next_serial,
                "live": sorted(self._live),
                "closed": self._closed,
            }
            self._beat += 1
        try:
            self._variable.set(state)
        except Exception:
            self.publish_failures += 1
            return False
        return True

    def _clean(self, handles: list[DaskHandle]) -> None:
        """Release each handle's future from the cluster (so a lost worker holding its
        result makes nothing run again) and clear its task's start mark; each handle once.
        Called only after a publication without their serials reached the scheduler."""
        from distributed import Event

        for handle in handles:
            with self._lock:
                if self._held.pop(handle.key, None) is None:
                    continue
            try:
                handle.future.release()
                Event(start_mark_name(handle.key), client=self.client).clear()
            except Exception:  # a mark left set is a few bytes on the scheduler, no danger
                self.clean_failures += 1


def open_dask(scheduler: str | None, workers: int | None, *, orphan_after_s: float) -> DaskExecutor:
    """A Dask executor on the scheduler at ``scheduler``, or on a new ``LocalCluster`` of
    ``workers`` single-threaded worker processes (made with ``allowed-failures`` 0 and
    ``worker-saturation`` 1.0) when ``scheduler`` is None. Refuses
    (:class:`ExecutorUnavailableError`) when the dask extra is missing, the scheduler
    cannot be reached or has no worker within
    :data:`CONNECT_TIMEOUT_S`, its ``allowed-failures`` is not 0, or a worker does not run
    this runstore version; whatever was started is closed again."""
    try:
        import dask
        from distributed import Client
        from distributed import LocalCluster
    except ImportError:
        raise ExecutorUnavailableError(
            "the dask executor needs the dask extra: pip install 'runstore[dask]'"
        ) from None
    cluster = None
    client = None
    try:
        if scheduler is None:
            count = 1 if workers is None else workers
            # No re-run of a task whose worker died; no task sent to a busy worker while
            # another is idle (one task per worker thread, the rest wait at the scheduler).
            settings = {
                "distributed.scheduler.allowed-failures": 0,
                "distributed.scheduler.worker-saturation": 1.0,
            }
            with dask.config.set(settings):
                cluster = LocalCluster(
                    n_workers=count, threads_per_worker=1, processes=True, dashboard_address=":0"
                )
            client = Client(cluster)
        else:
            client = _connect(Client, scheduler)
        _check_cluster(client, scheduler or "the local cluster")
        return DaskExecutor(client, cluster=cluster, orphan_after_s=orphan_after_s)
    except BaseException:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
        raise


def _connect(client_type: Any, address: str) -> Any:
    try:
        return client_type(address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as error:
        raise ExecutorUnavailableError(
            f"cannot reach the Dask scheduler at {address}: {_one_line(error)}"
        ) from None


def _check_cluster(client: Any, where: str) -> None:
    """Refuse a scheduler that re-runs tasks, or with no worker, or a worker that does
    not run this runstore version."""
    # A lambda travels by value: the scheduler need not have runstore installed.
    allowed = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.allowed_failures)
    if allowed != 0:
        raise ExecutorUnavailableError(
            f"the Dask scheduler at {where} re-runs a task whose worker died "
            f"(distributed.scheduler.allowed-failures is {allowed}); start it with "
            "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0 so that every retry is an "
            "explicit store authorization"
        )
    try:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
    except TimeoutError:
        raise ExecutorUnavailableError(
            f"the Dask scheduler at {where} has no worker after {CONNECT_TIMEOUT_S:g} s"
        ) from None
    mine = runstore_version()
    try:
        versions = client.run(runstore_version)
    except Exception as error:
        raise ExecutorUnavailableError(
            f"a Dask worker of {where} cannot run runstore: {_one_line(error)}"
        ) from None
    for worker, version in sorted(versions.items()):
        if version != mine:
            raise ExecutorUnavailableError(
                f"the Dask worker {worker} runs runstore {version}, this coordinator {mine}"
            )


if TYPE_CHECKING:
    _IS_AN_EXECUTOR: type[Executor] = DaskExecutor

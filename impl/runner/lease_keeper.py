"""Every live attempt's leases renewed on schedule, whatever the coordinator's thread does.

Rules of this file: the only code that renews leases. A :class:`LeaseKeeper` holds, for
each attempt the coordinator owns (from its reservation until its outcome is committed or
it is given up), the attempt's latest guard and lease times. Renewals are made by
:meth:`LeaseKeeper.renew_due` from two places: the coordinator's loop between its waits,
on its own store handle, and a background thread (:meth:`LeaseKeeper.background`) with a
handle of its own, so that copying inputs or publishing a large output on the coordinator's
thread (no SQLite transaction open meanwhile: SPEC.md section 11) never starves a lease.
Renewing twice is harmless: renewals are made one at a time (one caller at once), so a
renewal never shortens, and none changes a revision.

A renewal refused with the guard the keeper still holds is recorded as the attempt's
refusal; the coordinator acts on it only for an attempt whose worker runs (its guard does
not move then). A renewal refused because the coordinator moved the guard meanwhile (a
transition committed between reading the guard and renewing) is not a refusal: the next
pass renews with the new guard.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from collections.abc import Iterator

import attrs
from runstore.batch import WriteBatch
from runstore.errors import BusyError
from runstore.errors import RunStoreError
from runstore.receipts import OwnedAttempt
from runstore.store import RunStore

Clock = Callable[[], int]

BACKGROUND_PAUSE_S = 0.05
"""The longest the background thread sleeps between two looks at what is due (at most a
tenth of the lease, for short leases)."""


@attrs.define
class Held:
    """One attempt's ownership as the keeper knows it."""

    guard: OwnedAttempt
    renewed_at_ns: int
    expires_at_ns: int
    refusal: RunStoreError | None = None


class LeaseKeeper:
    """The leases of the attempts one coordinator owns; thread-safe."""

    def __init__(self, lease_ns: int, clock: Clock) -> None:
        self.lease_ns, self.clock = lease_ns, clock
        self._lock = threading.Lock()
        self._renewing = threading.Lock()
        """Held by one caller of :meth:`renew_due` at a time: each renewal samples the clock
        after the other caller's last commit, so it can never ask for an expiry earlier
        than one already committed (``renewal_shortens``, which would read as a lost
        lease: seen when the loop's thread and the background thread renewed one attempt
        at once)."""
        self._held: dict[str, Held] = {}
        self._longest_gap_ns = 0
        self.failure: BaseException | None = None
        """What stopped the background thread (its store could not be opened, or a bug);
        the coordinator raises it."""

    def hold(self, guard: OwnedAttempt, now_ns: int, expires_at_ns: int) -> None:
        """Keep ``guard``'s attempt renewed from now (its lease taken at ``now_ns``)."""
        with self._lock:
            self._held[guard.attempt_id] = Held(guard, now_ns, expires_at_ns)

    def moved(self, guard: OwnedAttempt) -> None:
        """A transition of a held attempt committed and returned ``guard``."""
        with self._lock:
            held = self._held.get(guard.attempt_id)
            if held is not None:
                held.guard = guard

    def claimed(self, guard: OwnedAttempt, expires_at_ns: int) -> None:
        """``begin_finalization`` took a new lease expiring at ``expires_at_ns``."""
        with self._lock:
            held = self._held.get(guard.attempt_id)
            if held is not None:
                held.guard = guard
                held.expires_at_ns = max(held.expires_at_ns, expires_at_ns)

    def release(self, attempt_id: str) -> None:
        """Stop renewing ``attempt_id`` (its outcome committed, or it was given up)."""
        with self._lock:
            self._held.pop(attempt_id, None)

    def refusal(self, attempt_id: str) -> RunStoreError | None:
        with self._lock:
            held = self._held.get(attempt_id)
            return None if held is None else held.refusal

    def next_due_ns(self) -> int | None:
        with self._lock:
            return min(
                (h.renewed_at_ns + self.lease_ns // 3 for h in self._held.values()),
                default=None,
            )

    def longest_gap_ns(self) -> int:
        """The longest time between two leases of one attempt taken so far (its
        reservation or a renewal, and the next renewal)."""
        with self._lock:
            return self._longest_gap_ns

    def renew_due(self, store: RunStore) -> None:
        """Renew every held attempt whose last lease is a third of the lease old, to
        ``now + lease`` (never shortening), in one write batch on ``store`` (group commit:
        each renewal its own step, a refusal its own attempt's). ``busy`` leaves them due
        for the next pass, well before the leases end."""
        with self._renewing:
            self._renew_due(store)

    def _renew_due(self, store: RunStore) -> None:
        now = self.clock()
        with self._lock:
            due = [
                (attempt_id, held.guard, held.expires_at_ns)
                for attempt_id, held in self._held.items()
                if held.refusal is None and now - held.renewed_at_ns >= self.lease_ns // 3
            ]
        if not due:
            return
        now = self.clock()
        batch = WriteBatch()
        renewals = []
        for attempt_id, guard, expires_at_ns in due:
            expires = max(now + self.lease_ns, expires_at_ns)
            renewals.append((attempt_id, guard, expires, batch.renew(guard, expires, now)))
        try:
            store.apply_batch(batch)
        except BusyError:
            return
        for attempt_id, guard, expires, renewal in renewals:
            try:
                renewal.result()
            except RunStoreError as refusal:
                self._refused(attempt_id, guard, refusal)
                continue
            self._renewed(attempt_id, now, expires)

    def _renewed(self, attempt_id: str, now_ns: int, expires_at_ns: int) -> None:
        with self._lock:
            held = self._held.get(attempt_id)
            if held is None or now_ns <= held.renewed_at_ns:
                return  # released meanwhile, or renewed by the other caller
            self._longest_gap_ns = max(self._longest_gap_ns, now_ns - held.renewed_at_ns)
            held.renewed_at_ns = now_ns
            held.expires_at_ns = max(held.expires_at_ns, expires_at_ns)

    def _refused(self, attempt_id: str, guard: OwnedAttempt, refusal: RunStoreError) -> None:
        with self._lock:
            held = self._held.get(attempt_id)
            if held is not None and held.guard == guard:
                held.refusal = refusal

    @contextlib.contextmanager
    def background(self, root: str) -> Iterator[None]:
        """Within the block, a thread with its own handle on the store at ``root`` renews
        what is due; it is stopped and joined when the block ends."""
        stop = threading.Event()
        thread = threading.Thread(
            target=self._keep, args=(root, stop), name="runstore-lease-keeper", daemon=True
        )
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def _keep(self, root: str, stop: threading.Event) -> None:
        pause = min(BACKGROUND_PAUSE_S, self.lease_ns / 10 / 1e9)
        try:
            with RunStore.open(root) as store:
                while not stop.wait(pause):
                    self.renew_due(store)
        except BaseException as error:  # the coordinator raises it: never a silent stop
            self.failure = error

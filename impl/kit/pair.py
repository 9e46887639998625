"""The model and a driver in lockstep (SPEC.md section 18.4): one call made on both, their
outcomes compared as the protocol writes them, and their projections compared.

Rules of this file: the model is the oracle and the source of every guard the driver is
handed (``context`` holds the model's guards). Where the model needs a choice the driver
made (the token of a stage it created: SPEC.md section 11, lease id ``staging-<token>``),
it is read from the driver's projection after the call, before the model makes it. The
model sees the driver's disk through :func:`runstore.testing.disk.disk_view` of the root,
read before the driver's recovery pass runs.
"""

from __future__ import annotations

from typing import Any

from runstore import model as m
from runstore.audit.projection import model_projection
from runstore.testing.disk import disk_view
from runstore.testing.lockstep import ModelWriter
from runstore.testing.lockstep import outcome
from runstore.testing.script import Call
from runstore.testing.script import Context

from .calls import request_of
from .client import Driver
from .forms import projection_of
from .forms import projection_wire
from .forms import result_wire
from .wire import same

Wire = tuple[str, Any]
"""An outcome as the protocol writes it: ``("ok", result)`` or ``("refused", code)``."""
STAGING = "staging-"


class Mismatch(Exception):
    """The driver and the model disagreed; the message says on what."""


class Unsupported(Mismatch):
    """The driver answered ``unsupported`` to an operation the check needs."""


class TokenQueue:
    """The model's stage tokens: those the driver was seen to use, in order, and past them
    a counter (for a stage the driver never made)."""

    def __init__(self) -> None:
        self.pending: list[str] = []
        self._next = 1

    def __call__(self) -> str:
        if self.pending:
            return self.pending.pop(0)
        self._next += 1
        return f"{self._next:032x}"


def wire_outcome(result: tuple[str, object]) -> Wire:
    kind, value = result
    return (kind, result_wire(value)) if kind == "ok" else (kind, value)


def new_stage_tokens(projection: dict[str, Any], state: m.ModelState) -> list[str]:
    """Tokens of the staging leases in ``projection`` that the model does not have, in
    the order they were granted (their fencing tokens)."""
    rows = [row for row in projection["leases"] if row[0] and row[0].startswith(STAGING)]
    fresh = [row for row in rows if row[0] not in state.leases]
    fresh.sort(key=lambda row: int(row[1]) if (row[1] or "").isdigit() else 0)
    return [row[0][len(STAGING) :] for row in fresh]


class Pair:
    """A model writer and a driver with a store open at ``root``."""

    def __init__(self, driver: Driver, root: str, state: m.ModelState | None = None) -> None:
        self.driver = driver
        self.root = root
        self.tokens = TokenQueue()
        self.model = ModelWriter(state or m.ModelState(), tokens=self.tokens, disk=self._disk)
        self._seen: m.DiskView | None = None
        """The disk as it was before the driver's recovery pass ran (the model's view)."""

    def _disk(self, state: m.ModelState) -> m.DiskView:
        return self._seen if self._seen is not None else disk_view(self.root, state)

    def open(self) -> None:
        self.expect_result("open", {"root": self.root})

    def expect_result(self, op: str, args: dict[str, Any]) -> Any:
        reply = self.driver.request(op, args)
        if reply.kind == "unsupported":
            raise Unsupported(f"{op} is unsupported")
        if reply.kind != "result":
            raise Mismatch(f"{op} gave {reply.kind} {reply.value!r}")
        return reply.value

    def projection(self) -> dict[str, Any]:
        return projection_of(self.expect_result("projection", {}))

    def model_projection(self, state: m.ModelState | None = None) -> dict[str, Any]:
        return projection_wire(model_projection(state or self.model.state))

    def apply(self, call: Call, context: Context) -> Wire:
        """Make ``call`` on the driver and on the model; raises :class:`Mismatch` unless
        both give the same outcome. Keeps the guard it returns (the model's) in
        ``context`` and returns the outcome."""
        guard = context.get(call.attempt) if call.attempt is not None else None
        op, args = request_of(call, guard)
        self._seen = disk_view(self.root, self.model.state) if op == "recover" else None
        reply = self.driver.request(op, args)
        if reply.kind == "unsupported":
            raise Unsupported(f"{op} is unsupported")
        if op in ("publish_artifact", "publish_finalization", "recover"):
            self.tokens.pending = new_stage_tokens(self.projection(), self.model.state)
        expected = outcome(lambda: call.invoke(self.model, context))
        self._seen = None
        got: Wire = ("ok", reply.value) if reply.kind == "result" else ("refused", reply.value)
        wanted = wire_outcome(expected)
        if got[0] != wanted[0] or not same(got[1], wanted[1]):
            raise Mismatch(f"{call.name}: the driver gave {got!r}; the model gave {wanted!r}")
        if expected[0] == "ok":
            call.keep(expected[1], context)
        return wanted

    def check_projection(self, label: str) -> None:
        got, wanted = self.projection(), self.model_projection()
        if got != wanted:
            raise Mismatch(f"after {label}: " + projection_difference(wanted, got))


def projection_difference(wanted: dict[str, Any], got: dict[str, Any]) -> str:
    """The first table whose rows differ, with the first differing rows."""
    for table in wanted:
        if wanted[table] != got.get(table):
            extra = [row for row in got.get(table, []) if row not in wanted[table]]
            missing = [row for row in wanted[table] if row not in got.get(table, [])]
            return (
                f"table {table}: the model has {missing[:2]!r} that the driver lacks; "
                f"the driver has {extra[:2]!r} that the model lacks"
            )
    return "the projections differ"

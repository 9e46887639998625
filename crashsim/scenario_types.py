"""The crash simulator's scenario and step types (SPEC.md sections 14.8-14.11).

Rules of this file: two frozen value types and nothing else; the catalog of scenarios and
the steps they are built from are :mod:`runstore.crashsim.scenarios`. A :class:`Scenario`
is a fixture recipe (``setup`` steps run once on a fresh store, which is then closed) plus
the ``steps`` whose every boundary is a crash point; each :class:`Step` is a
:class:`~runstore.testing.script.Call`, written once as data so the same step runs on the
store and on the model (``store_action`` exists only for the deliberately faulty
scenarios of :mod:`runstore.crashsim.faulty`).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
from runstore import RunStore
from runstore.testing.lockstep import Writer
from runstore.testing.lockstep import outcome
from runstore.testing.script import Call
from runstore.testing.script import Context

StoreAction = Callable[[RunStore, Context], object]


@attrs.frozen
class Step:
    """One writer operation of a scenario."""

    call: Call
    store_action: StoreAction | None = None
    refused: str | None = None
    """The code the step is refused with on purpose (a setup step that leaves what a
    crash would leave); its result is then ``("refused", code)`` on both sides."""

    @property
    def name(self) -> str:
        return self.call.name

    def action(self, writer: Writer, context: Context) -> object:
        """Run the step through ``writer`` (the model, or a store)."""
        if self.refused is None:
            return self.call.apply(writer, context)
        result = outcome(lambda: self.call.apply(writer, context))
        if result != ("refused", self.refused):
            raise AssertionError(f"{self.name} gave {result!r}, not refused {self.refused}")
        return result

    def on_store(self, store: RunStore, context: Context) -> object:
        """Run the step on an open store."""
        if self.store_action is not None:
            return self.store_action(store, context)
        return self.action(store, context)


@attrs.frozen
class Scenario:
    """A sweep's scenario: its fixture recipe and its crash-tested steps."""

    name: str
    setup: tuple[Step, ...]
    steps: tuple[Step, ...]
    initialized: bool = True
    """False for the initialization scenario, whose fixture is an empty root."""
    resume: bool = False
    """After a crash, re-run the interrupted step and the rest before the generic
    continuation (publication scenarios); False keeps the generic continuation only."""
    finish: tuple[Step, ...] = ()
    """With ``resume``: the steps that take the attempt on to its intended end."""
    creates_root: bool = False
    """The root does not exist before opening: opening creates it first, as ``runstore
    run --init`` does (:func:`runstore.store.store_root.create_root`), and a user finding
    it missing after a crash runs ``--init`` again."""
    exports: bool = False
    """After its steps, the store is closed and exported into ``<root>.export`` (a last
    step named :data:`~runstore.crashsim.exporting.EXPORT`, which changes nothing the
    model holds; see :func:`~runstore.crashsim.exporting.export_closed`)."""
    parent: bool = False
    """The run makes directories beside the root (the root itself, an export directory):
    the power-loss method photographs the root's parent
    (:func:`runstore.crashsim.photographs.photograph_parent`)."""
    unsynced: tuple[str, ...] = ()
    """``fnmatch`` patterns of fixture paths (relative to the root) that are in the page
    cache but not durable when the steps start, with everything beneath them: what a
    process that died before its syncs leaves while the machine stays up (the power-loss
    method only; every other method sees the files as they are)."""

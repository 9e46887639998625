"""The pure model driven one committed step at a time, the way a writer drives a store: the
state a model writer holds, the refusal it raises, and the stage tokens it draws.

Rules of this file: imports the model and the value layer only, and knows neither the
writer interface (:mod:`runstore.testing.lockstep`) nor publication
(:mod:`runstore.testing.model_publisher`); both build on it, so the dependency between them
runs one way (lockstep -> model_publisher -> here). No I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from runstore import model as m

T = TypeVar("T")


class Diverged(Exception):
    """The store and the model disagreed, or the model broke its own contract."""


class ModelRefusal(Exception):
    """The model refused a call; ``code`` is the store error code for the same call."""

    def __init__(self, refusal: m.Refusal) -> None:
        super().__init__(f"{refusal.code}: {refusal.message}")
        self.code = refusal.code


class StageTokens:
    """Deterministic stage tokens for tests: ``00…01``, ``00…02``, ... (32 hex digits),
    or from ``start``."""

    def __init__(self, start: int = 1) -> None:
        self._next = start

    def __call__(self) -> str:
        token = f"{self._next:032x}"
        self._next += 1
        return token


class ModelSteps:
    """A current model state and the one way to move it: :meth:`apply` a model operation's
    ``(state, result | Refusal)``."""

    def __init__(self, state: m.ModelState, tokens: Callable[[], str] | None = None) -> None:
        self.state = state
        self.trail: list[m.ModelState] = []
        """Every state this writer moved to, in order: a publication commits several
        transactions, and a crash between them leaves one of these intermediate states."""
        self.tokens = tokens if tokens is not None else StageTokens()
        """Where the model's stage tokens come from (the store's come from the seam
        :func:`runstore.store.publication.staging.install_token_source`); two fresh
        :class:`StageTokens` counters keep the two in step."""

    def apply(self, step: tuple[m.ModelState, T | m.Refusal]) -> T:
        """The result of ``step``, after moving to its state; a refusal raises
        :class:`ModelRefusal` (and :class:`Diverged` if the model changed its state
        anyway)."""
        new_state, result = step
        if isinstance(result, m.Refusal):
            if new_state is not self.state:
                raise Diverged(f"the model refused ({result.code}) but changed its state")
            raise ModelRefusal(result)
        if new_state is not self.state:
            self.trail.append(new_state)
        self.state = new_state
        return result

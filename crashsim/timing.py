"""Where a sweep's time goes: named phases, summed across processes.

Rules of this file: a :class:`Phases` sums wall seconds and counts per phase name; a trial
child measures its own phases and writes them with its finding (:meth:`Phases.to_json`),
and the sweep's parent adds them up (:meth:`Phases.add`). Measuring is two
``time.perf_counter`` calls per phase, cheap enough to stay on in every run; ``--profile``
only decides whether the table is printed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from collections.abc import Mapping
from contextlib import contextmanager

import attrs


@attrs.define
class Phases:
    """Seconds and counts per phase name, in the order phases were first seen."""

    seconds: dict[str, float] = attrs.field(factory=dict)
    counts: dict[str, int] = attrs.field(factory=dict)

    @contextmanager
    def measure(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.record(name, time.perf_counter() - started)

    def record(self, name: str, seconds: float, count: int = 1) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.counts[name] = self.counts.get(name, 0) + count

    def add(self, other: Phases) -> None:
        for name, seconds in other.seconds.items():
            self.record(name, seconds, other.counts.get(name, 0))

    def to_json(self) -> dict[str, list[float]]:
        return {name: [seconds, self.counts[name]] for name, seconds in self.seconds.items()}

    @classmethod
    def from_json(cls, value: Mapping[str, object]) -> Phases:
        phases = cls()
        for name, pair in value.items():
            if isinstance(pair, list) and len(pair) == 2:
                phases.record(str(name), float(pair[0]), int(pair[1]))
        return phases

    def table(self, title: str) -> list[str]:
        """Lines: each phase's total seconds, count, mean milliseconds and share of the
        total of all phases (phases may nest, so shares are of the listed sum)."""
        total = sum(self.seconds.values()) or 1.0
        lines = [f"{title}: phase  total_s  count  mean_ms  share"]
        for name, seconds in sorted(self.seconds.items(), key=lambda item: -item[1]):
            count = self.counts[name]
            mean = 1000 * seconds / count if count else 0.0
            lines.append(
                f"  {name:<22} {seconds:8.2f} {count:6d} {mean:8.2f} {seconds / total:6.1%}"
            )
        return lines

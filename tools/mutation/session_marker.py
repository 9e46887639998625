"""A pytest plugin for :mod:`mutation.run_mutant`: when the test session finishes, write its
exit status to the file ``$MUTATION_SESSION_MARKER`` names.

A mutant can make the test process end early with status 0 (a probe's forked-child branch
taken by the parent runs ``os._exit(0)`` in pytest's own process): without the marker that
run would read as "every test passed" and the mutant as a survivor. Rules of this file:
it writes only that file, and only from the session's end.
"""

from __future__ import annotations

import os

import pytest

MARKER_VARIABLE = "MUTATION_SESSION_MARKER"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get(MARKER_VARIABLE)
    if path:
        with open(path, "w", encoding="utf-8") as marker:
            marker.write(str(int(exitstatus)))

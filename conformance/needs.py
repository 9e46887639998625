"""A test that needs a program the machine may lack (Chromium, Node): skipped, and saying
why, where it is missing, except in CI (``CI=true``), where it fails: ``.ci/run`` installs
each one, so a test can never silently not run there."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing(reason: str) -> NoReturn:
    """Skip with ``reason``; under ``CI=true``, fail with it instead."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI must run this test (.ci/run installs what it needs)")
    pytest.skip(reason)

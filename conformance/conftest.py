"""The whole suite's pytest configuration: the Hypothesis profiles. Each group's own
fixtures (its ``world``) live in the group's ``conftest.py``; see README.md here.

``default`` keeps the test command's stateful and property runs to about two minutes on
two cores; ``nightly`` (``HYPOTHESIS_PROFILE=nightly``) runs far more examples and longer
programs. Deadlines are off: this machine is shared and noisy, and speed is shown by the
benchmarks under tools/, never by timed tests.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck
from hypothesis import settings

settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "nightly",
    deadline=None,
    max_examples=2000,
    stateful_step_count=120,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

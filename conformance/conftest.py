"""The whole suite's pytest configuration: the Hypothesis profiles. Each group's own
fixtures (its ``world``) live in the group's ``conftest.py``; see README.md here.

``default`` keeps the test command's stateful and property runs to about two minutes on
two cores; ``nightly`` (``HYPOTHESIS_PROFILE=nightly``) runs far more examples and longer
programs; ``mutation`` is tools/mutate's (a fixed seed, no shrinking). Deadlines are off:
this machine is shared and noisy, and speed is shown by the benchmarks under tools/, never
by timed tests.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck
from hypothesis import Phase
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
# tools/mutate's runs (tools/mutation/run_mutant.py): the same examples every time, and no
# shrinking (a mutant is killed by the first failure; shrinking it only costs time).
settings.register_profile(
    "mutation",
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

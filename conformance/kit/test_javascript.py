"""The second implementation (SPEC.md section 18.5): ``impl/kit/js/``, the value level in
JavaScript on Node's standard library, written from SPEC.md and ``vectors/README.md``
alone, passes every value check of the kit.

Without ``node`` on the PATH the test is skipped and says so, except in CI (``CI=true``),
where it fails: ``.ci/run`` installs Debian's ``nodejs``, so it can never silently not run
there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from runstore.kit import KitOptions
from runstore.kit import run_kit
from runstore.kit.report import PASS
from runstore.kit.run import names

from conformance.needs import missing

DRIVER = Path(__file__).resolve().parents[2] / "impl" / "kit" / "js" / "runstore_values.mjs"


def node() -> str:
    found = shutil.which("node")
    if found is None:
        missing("node is not on the PATH: the JavaScript implementation was not checked")
    return found


def test_the_javascript_implementation_passes_every_value_check() -> None:
    report = run_kit([node(), str(DRIVER)], KitOptions(level="values"))
    assert report.implementation.startswith("runstore-values-js")
    statuses = [(check.name, check.status, check.detail) for check in report.checks]
    assert [name for name, _, _ in statuses] == names("values")
    assert [s for s in statuses if s[1] != PASS] == []


def test_the_javascript_implementation_leaves_the_store_levels_not_implemented() -> None:
    """It implements the value level only: every later check is reported not
    implemented (never passed, never failed)."""
    report = run_kit(
        [node(), str(DRIVER)],
        KitOptions(level="store", only=("events.json", "store lockstep", "crash campaign")),
    )
    assert [(c.name, c.status) for c in report.checks] == [
        ("events.json", "not_implemented"),
        ("store lockstep", "not_implemented"),
        ("crash campaign", "not_implemented"),
    ]

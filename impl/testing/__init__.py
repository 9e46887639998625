"""runstore.testing: the public kit for testing against runstore, used by runstore's own
conformance tests, crash simulator and tools alike.

Importing this package loads only the value layer (never ``sqlite3`` or ``fcntl``): it
exposes the record factories of :mod:`runstore.testing.factories` directly. The rest of the
kit is imported by module, when needed:

* :mod:`runstore.testing.factories`: consistent, valid records (decisions, runs, slots of
  every kind, observations, artifact registrations, lease requests), all pure functions.
* :mod:`runstore.testing.fixtures`: the owners, the usual execution path and literal-id
  builders the project's own tests and scenarios share.
* :mod:`runstore.testing.lockstep`: one ``Writer`` interface over the store and the model
  (``ModelWriter``), and ``lockstep(model, store, call)``, which makes one call on both
  and raises ``Diverged`` unless they agree (the same result, or the same refusal code).
  ``ModelWriter`` builds on :mod:`runstore.testing.model_steps` (the current state,
  ``apply``, ``ModelRefusal``) and publishes through
  :mod:`runstore.testing.model_publisher`.
* (the durable projection of a database file and of a model state, comparable with
  ``==``, lives in :mod:`runstore.audit.projection`: the audit uses it in production.)
* :mod:`runstore.testing.script`: writer call scripts as data (``Call``), played on any
  ``Writer``; the crash simulator's scenarios and the event vectors are written in it.
* :mod:`runstore.testing.trace` and :mod:`runstore.testing.scenarios`: the model's named
  scenarios rendered as Markdown transcripts (``python -m runstore.testing.trace``).

Example::

    from runstore import RunStore, FirstAttempt
    from runstore import testing

    bundle = testing.one_shot("slot-1")
    with RunStore.open(root) as store:
        slot_id = store.register_one_shot(*bundle.arguments())
        guard = store.reserve(slot_id, FirstAttempt(), testing.lease("a", expires_at_ns=t), now)
"""

from __future__ import annotations

from runstore.testing.factories import CANDIDATE
from runstore.testing.factories import LOGICAL_SPEC
from runstore.testing.factories import PROBLEM
from runstore.testing.factories import OneShot
from runstore.testing.factories import Slots
from runstore.testing.factories import artifact
from runstore.testing.factories import decision
from runstore.testing.factories import digest
from runstore.testing.factories import lease
from runstore.testing.factories import observation
from runstore.testing.factories import one_shot
from runstore.testing.factories import resolved_run
from runstore.testing.factories import slots
from runstore.testing.factories import stream
from runstore.testing.factories import warmup

__all__ = [
    "CANDIDATE",
    "LOGICAL_SPEC",
    "PROBLEM",
    "OneShot",
    "Slots",
    "artifact",
    "decision",
    "digest",
    "lease",
    "observation",
    "one_shot",
    "resolved_run",
    "slots",
    "stream",
    "warmup",
]

"""runstore.store: the store layer, everything that reads or writes a store's files.

Rules of this package: it imports the value layer, the two seams (:mod:`runstore.sql`,
:mod:`runstore.durable`) and itself; never the model, the runner, the CLI,
:mod:`runstore.testing` or the crash simulator (``conformance/meta/test_layers.py``).
Callers hold a :class:`RunStore` (``RunStore.open(root)``) and nothing else of it.

* the handle and opening: ``run_store`` (:class:`RunStore`), ``store_root`` (the root's
  path checks, store files and the initialization lock), ``probes`` (capability probes),
  ``schema_sql`` and ``schema_check`` (the embedded schema ``schema/v1.sql``: creating and
  verifying it);
* the writer's database steps, each named as its twin in :mod:`runstore.model`:
  ``registration``, ``attempts``, ``guard``, ``leases``, ``events``, ``finalization``,
  ``observations``, ``artifacts``; and ``coordinator_reads`` (a coordinator's reads);
* :mod:`runstore.store.publication` (transactional publication) and
  :mod:`runstore.store.recovery` (explicit recovery), one sub-package each.
"""

from runstore.store.run_store import RunStore

__all__ = ["RunStore"]

"""The export step of the crash simulator's ``export`` scenario: ``runstore export`` of a
closed store into a directory beside its root (SPEC.md sections 14.8 and 16.3).

Rules of this file: run only in the harness's children, on a store the scenario opened;
the export directory is ``<root>.export``, a sibling of the root (``export`` refuses a
directory inside the store), so that its name normalizes alike in every run
(``$ROOT.export``).
"""

from __future__ import annotations

from typing import Final

from runstore import RunStore
from runstore.inspection.export import export
from runstore.inspection.snapshot import Snapshot

EXPORT_SUFFIX: Final = ".export"
"""The export step writes to ``<root>.export``, beside the root (``export`` refuses a
directory inside the store)."""
EXPORT: Final = "export"


def export_directory(root: str) -> str:
    """Where the export step of a store at ``root`` writes."""
    return root + EXPORT_SUFFIX


def export_closed(store: RunStore) -> None:
    """The export step: ``runstore export`` of the store. The store is closed first (an
    inspection copy refuses a process that holds a connection to the database), then
    every campaign's tables are exported to a new directory beside the root, its parent
    synced (SPEC.md section 16.3). A read command: nothing the model holds changes."""
    root = store.root
    store.close()
    with Snapshot.take(root) as snapshot:
        export(snapshot, export_directory(root))

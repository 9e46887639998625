"""runstore: a crash-safe, formally modelled durable run store on SQLite.

Public surface: :class:`RunStore`, the schema constants and the error hierarchy.
"""

from runstore.errors import RunStoreError
from runstore.schema_sql import RUN_STORE_SCHEMA_SQL, RUN_STORE_SCHEMA_VERSION
from runstore.store import RunStore

__all__ = [
    "RUN_STORE_SCHEMA_SQL",
    "RUN_STORE_SCHEMA_VERSION",
    "RunStore",
    "RunStoreError",
]

"""Artifact rows in the model: registering verified artifact metadata.

Rules of this file: pure functions over :class:`~runstore.model.state.ModelState`; the
writer's counterpart is :mod:`runstore.store.artifacts`. A registration is reused when an
identical row (same kind, path and digests) exists; any other row with the same id is a
conflict.
"""

from __future__ import annotations

import attrs
from runstore.errors import RegistrationConflictError
from runstore.model.state import ModelState
from runstore.model.state import Refusal
from runstore.model.state import put
from runstore.model.state import refuse
from runstore.records import ArtifactRegistration


def with_artifact(state: ModelState, artifact: ArtifactRegistration) -> ModelState | Refusal:
    """``state`` with ``artifact`` registered.

    Registering the same kind, path, content and manifest digests again reuses the row
    (the first ``verified_at_ns`` stays) and returns ``state`` itself; a row with the same
    id and any other of those fields refuses with ``registration_conflict``.
    """
    existing = state.artifacts.get(artifact.id)
    if existing is None:
        return attrs.evolve(state, artifacts=put(state.artifacts, artifact.id, artifact))
    if existing.indexed_columns() != artifact.indexed_columns():
        return refuse(
            RegistrationConflictError, f"artifact {artifact.id} is registered with other digests"
        )
    return state

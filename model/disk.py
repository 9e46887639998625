"""What recovery finds on disk, as the model is told it: the stages under ``artifacts/``,
the unregistered completed objects and the registered artifacts that no longer verify
(SPEC.md section 14, "The model").

Rules of this file: values only. The model never looks at a filesystem: whoever calls
:func:`runstore.model.recover` (a test, or the lockstep driver reading a real store root)
describes the disk with a :class:`DiskView`. Each value validates its shape on
construction (``invalid_record``), so recovery can trust it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

import attrs
from runstore.enums import ArtifactKind
from runstore.errors import InvalidRecordError
from runstore.model.state import frozen_map
from runstore.records import ArtifactRegistration
from runstore.validation import check_store_path

STAGE_PREFIX: Final = "artifacts/.staging-"
"""The store path of every stage starts so (SPEC.md section 14, "Stages")."""

OBJECT_PATH: Final = re.compile(
    "artifacts/(" + "|".join(kind.value for kind in ArtifactKind) + ")-[0-9a-f]{64}"
)
"""The store path of a completed object: ``artifacts/<known kind>-<64 lowercase hex>``."""


def object_id(path: str) -> str:
    """The artifact id an object at ``path`` (an :data:`OBJECT_PATH`) would be registered
    under: ``run-store-v1:<kind>-<hex>``."""
    return "run-store-v1:" + path.removeprefix("artifacts/")


@attrs.frozen(kw_only=True)
class DiskObject:
    """An unregistered completed object at ``artifacts/<kind>-<64 hex>``, as recovery finds
    it. ``registration`` is what it verifies as (kind, path and digests; its
    ``verified_at_ns`` is ignored), None when it does not verify or its name is not its
    address; ``outcome`` is the bytes of its top-level ``outcome.json`` (attempt objects),
    None when it has none."""

    registration: ArtifactRegistration | None = attrs.field(
        validator=attrs.validators.optional(attrs.validators.instance_of(ArtifactRegistration))
    )
    outcome: bytes | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(bytes))
    )


def _stages(
    _: object, attribute: attrs.Attribute[Mapping[str, bool]], value: Mapping[str, bool]
) -> None:
    for path, held in value.items():
        check_store_path(path, attribute.name)
        if not path.startswith(STAGE_PREFIX) or "/" in path.removeprefix("artifacts/"):
            raise InvalidRecordError(f"stage {path!r:.80} is not artifacts/.staging-<name>")
        if type(held) is not bool:
            raise InvalidRecordError(f"whether stage {path!r:.80} is held must be a bool")


def _objects(
    _: object, attribute: attrs.Attribute[Mapping[str, DiskObject]], value: Mapping[str, DiskObject]
) -> None:
    for path, found in value.items():
        if type(path) is not str or OBJECT_PATH.fullmatch(path) is None:
            raise InvalidRecordError(f"{attribute.name} {path!r:.80} is not an object address")
        if not isinstance(found, DiskObject):
            raise InvalidRecordError(f"the object at {path} must be a DiskObject")
        if found.registration is not None and found.registration.path != path:
            raise InvalidRecordError(f"the object at {path} verifies as another address")


def _corrupt(_: object, attribute: attrs.Attribute[frozenset[str]], value: frozenset[str]) -> None:
    if not isinstance(value, frozenset) or not all(type(item) is str for item in value):
        raise InvalidRecordError(f"{attribute.name} must be a frozenset of artifact ids")


def _stage_map(items: Mapping[str, bool]) -> Mapping[str, bool]:
    return frozen_map(items)


def _object_map(items: Mapping[str, DiskObject]) -> Mapping[str, DiskObject]:
    return frozen_map(items)


@attrs.frozen(kw_only=True)
class DiskView:
    """What one recovery pass finds on disk.

    * ``stages``: the store path (``artifacts/.staging-...``) of each stage directory ->
      whether its lock is held by another process;
    * ``objects``: store path -> :class:`DiskObject`, for the completed objects under
      ``artifacts/``; an entry whose artifact id is registered is not recovery's and is
      passed over, so the view of a store before a pass serves for the pass after it;
    * ``corrupt``: the ids of registered artifacts whose directory no longer verifies.
    """

    stages: Mapping[str, bool] = attrs.field(
        factory=frozen_map, converter=_stage_map, validator=_stages
    )
    objects: Mapping[str, DiskObject] = attrs.field(
        factory=frozen_map, converter=_object_map, validator=_objects
    )
    corrupt: frozenset[str] = attrs.field(default=frozenset(), validator=_corrupt)

"""runstore.store.publication: transactional publication of content-addressed artifact
directories (SPEC.md section 11, completed objects section 12, the outcome document 13).

Rules of this package: ``publish`` is the orchestration, in SPEC's order (no transaction
open while the caller populates, hashes, syncs or renames); ``publish_tx`` its database
steps (the twin of :mod:`runstore.model.publication`); ``staging`` the locked stages and
the store-wide recovery lock; ``inventory``, ``file_pass`` and ``objects`` the filesystem
content pipeline (scan; one pass per file: read, hash, sync; complete, verify);
``outcome_document`` the ``outcome.json`` bytes over SQL (the twin of
:mod:`runstore.model.outcome_document`). Import the submodules directly.
"""

"""runstore.store.recovery: explicit recovery, ``RunStore.recover(clock)`` (SPEC.md
section 14).

Rules of this package: ``recover`` is the orchestration (the twin of
:mod:`runstore.model.recovery`), in SPEC's order; ``recover_tx`` its database steps and a
candidate's checks (the twin of :mod:`runstore.model.recovery_checks`); ``disk`` its
filesystem side (the twin of :mod:`runstore.model.disk`'s view). Import the submodules
directly.
"""

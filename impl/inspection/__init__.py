"""The inspection reader (SPEC.md section 15.6): ``status`` and ``explain`` over a private,
validated copy of a store's database.

Rules of this package: it never opens SQLite on a store's own files, never creates a file
in a store root, and never initializes, recovers or quarantines anything.
:mod:`runstore.inspection.snapshot` takes the copy, :mod:`runstore.inspection.reader`
derives slot states and the status report, :mod:`runstore.inspection.explain` gathers one
slot's records and history. Import the submodules directly (this package imports nothing).
"""

"""Statistics of repeated measurements: pure functions of numbers (SPEC.md section 17).

Rules of this package: no I/O, no clock, no randomness, no store; only the value layer and
the pure standard modules (``conformance/meta/test_layers.py``). Its modules, each imported
by name (this file re-exports nothing): :mod:`~runstore.analysis.ranks` (the null
distributions and the Mann-Whitney test), :mod:`~runstore.analysis.summary` (one group),
:mod:`~runstore.analysis.compare` (a candidate against a baseline, and its words) and
:mod:`~runstore.analysis.numbers` (numbers for humans).
"""

"""runstore.crashsim: the crash simulator. It forks children that leave with ``os._exit``
at every traced SQL statement and durability boundary, reopens each crashed copy, and
compares what survived with the model (through :mod:`runstore.testing`'s projection and
lockstep kit).

Rules of this package: test-only, never imported by the runtime or the model; it may import
the store API, :mod:`runstore.testing`, the model, and the two seams' documented observer
hooks (``runstore.sql.install_observer``, ``runstore.durable.install_observer``).
"""

"""runstore.crashsim: the crash simulator. A *sweep* (:func:`runstore.crashsim.sweep.run_sweep`)
crashes one scenario at its chosen traced SQL statements and durability boundaries by one
method: forking a child that leaves with ``os._exit`` there (:mod:`~runstore.crashsim.kill`)
or photographing the store while one execution is stopped there (the default,
:mod:`~runstore.crashsim.images`; :mod:`~runstore.crashsim.equivalence` shows both leave
the same store), failing a durability call or SQLite's writes there
(:mod:`~runstore.crashsim.iofaults`), or cutting the power there
(:mod:`~runstore.crashsim.powerloss`); it reopens each crashed copy and compares what
survived with the model (through :mod:`runstore.testing`'s projection and lockstep kit). A
*suite* (:mod:`~runstore.crashsim.suite`) runs the sweeps of several scenarios.
:mod:`runstore.crashsim.race` races two publisher processes on identical content, killing
the winner after its rename in one variant.

Rules of this package: test-only, never imported by the runtime or the model; it may import
the store API, :mod:`runstore.testing`, the model, the two seams' documented observer
hooks (``runstore.sql.install_observer``, ``runstore.durable.install_observer``) and the
stage-token test hook (``runstore.store.publication.staging.install_token_source``); only the
deliberately faulty scenarios reach into the runtime's private helpers.
"""

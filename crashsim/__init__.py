"""runstore.crashsim: the crash simulator. It crashes the store at every traced SQL
statement and durability boundary, either by forking a child that leaves with
``os._exit`` there or by photographing the store while one execution is stopped there
(the default; :mod:`runstore.crashsim.equivalence` shows both leave the same store),
reopens each crashed copy, and compares what survived with the model (through
:mod:`runstore.testing`'s projection and lockstep kit). :mod:`runstore.crashsim.race`
races two publisher processes on identical content, killing the winner after its rename
in one variant.

Rules of this package: test-only, never imported by the runtime or the model; it may import
the store API, :mod:`runstore.testing`, the model, the two seams' documented observer
hooks (``runstore.sql.install_observer``, ``runstore.durable.install_observer``) and the
stage-token test hook (``runstore.store.publication.staging.install_token_source``); only the
deliberately faulty scenarios reach into the runtime's private helpers.
"""

"""runstore.crashsim: test-only tools that check the store's durable state against the
model: the durable projection (here), and the crash simulator.

Rules of this package: never imported by the runtime (``impl/``); it may import the
store API, the model and the two seams' observer hooks.
"""

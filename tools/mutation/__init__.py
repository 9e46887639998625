"""Generated mutation testing with cosmic-ray: the library behind ``tools/mutate``.

Modules: :mod:`mutation.settings` (the committed configuration, baseline and equivalents),
:mod:`mutation.scratch` (the scratch copies every mutant is made in),
:mod:`mutation.selection` (which tests run for a mutant), :mod:`mutation.run_mutant` (the
test command a worker runs), :mod:`mutation.changes` (``--changed-since``),
:mod:`mutation.session` (a module's cosmic-ray session and its workers),
:mod:`mutation.results` (scores), :mod:`mutation.report` (JSON, HTML and the summary
lines) and :mod:`mutation.shards` (the nightly rotation).

The rule all of them keep: the working tree is never mutated. cosmic-ray edits the file it
mutates in place and restores it afterwards, so a run stopped between the two would leave
a mutant behind; here every edit happens in a copy under ``.mutate/`` that is rebuilt from
the working tree at the start of every run.
"""

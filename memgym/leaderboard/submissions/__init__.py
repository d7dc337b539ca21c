"""Stage 6, submissions: an agent sent by pull request and how a maintainer verifies it.

:mod:`.check` is the conformance check a submitter runs first; :mod:`.format` is the ``submissions/<name>/``
folder and its offline checks; :mod:`.verification` is ``memgym leaderboard verify``, which re-runs cells with the
agent in a child process (:mod:`.isolation`) inside a sandbox (:mod:`.sandbox`), compares them with the records
(:mod:`.comparison`) and writes the verdict (:mod:`.verdict`).
"""

"""The league table, an application above the course's library: the course's loaders (the learner's exercises,
and the solutions where they exist) beside what practitioners use, on the same work. `python -m league`.

It is the one shipped package that may import `exercises` and `solutions`: a learner's copy has no solutions, and
their entries then read "not installed" with the reason. `league.entries` is the roster, `league.table` gates, times,
ranks and draws them, `league.remote` does the same from module 10's S3 server, `league.cli` is the command, and
`league.notebook` runs a small league from notebook 08."""

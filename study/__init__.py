"""The studies and commands that compose every other stage: the optimisation matrix, precision
verification, `embedperf bench` (serve, run, report) and `embedperf search` (probe, report).

They start services, run load, analyse and build reports, so they sit on top of those stages
rather than inside one.

Subpackages by concern: `precision`, `matrix`, `verify`, `canary`, `bench` (bench and search); the
evaluation corpus (`corpus`, eval_corpus.jsonl) and the fp32 vectors (`vectors`, `reference_vectors`)
that several of them read sit beside them.
"""

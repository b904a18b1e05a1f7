"""The load side: Locust drives the target and every request becomes one row of the run folder. Its
subpackages and their layers (cli, wiring, shaping | distributed, lifecycle, recording | processes, traffic)
are described in ARCHITECTURE.md and checked by `lint-imports`."""

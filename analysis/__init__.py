"""Analysis: a run folder in, every derived figure of the run out (summary.json, tables, figure inputs).

Subpackages, top layer first (each imports only those below it; `lint-imports` checks it):
cli (`embedperf capacity`, `embedperf synth`) -> compare (two runs: what is resampled, the changes
with their intervals, the gate, the quality gate) -> run (one run folder analysed: `analyse_folder`,
the summary model and its tables) -> engine (DuckDB over the run folder, memory bounded whatever the
run's length) -> figures (derived figures: bootstrap intervals, capacity, bottleneck, devices, health, soak,
data-quality findings) -> model (the typed records every layer passes: step statistics, telemetry,
decomposition, outage windows, slowest requests, served models).

Every figure has one implementation here; the in-memory (pandas) references the equality tests
compare the engine with live in tests/oracles/in_memory.
"""

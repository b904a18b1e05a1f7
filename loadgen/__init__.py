"""The load side: Locust drives the target and every request becomes one row of the run folder.

Subpackages, top layer first (each imports only those below it; `lint-imports` checks it): cli (`embedperf
run`, the headless Locust child, local workers) -> wiring (what Locust calls: event listeners, User classes,
the load shape) -> shaping (open-loop dispatch, the capacity-search driver) and distributed (rows forwarded
from workers) -> lifecycle (the run folder from first stage to manifest, pre-flight, the exit verdict) ->
recording (rows, live view, the generator's CPU) and processes (collectors, redis, the reference service as
child processes) -> traffic (one request: payloads, arrivals, the exchange and its validation, the per-process
run context)."""

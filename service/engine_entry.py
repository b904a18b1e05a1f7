"""The engine process's entry point, named by the supervisor without loading what the engine needs."""

from __future__ import annotations

from service.settings import ServiceSettings


def engine_main(settings: ServiceSettings, endpoint: str, status_path: str, generation: int) -> None:
    """Entry point of the engine process (multiprocessing, spawn)."""
    # torch and transformers load here, in the engine process: never in the supervisor (quick start and exit)
    from service.engine_process import run_engine

    run_engine(settings, endpoint, status_path, generation)

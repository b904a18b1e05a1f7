"""The typed records the analysis passes between its layers: steps, telemetry, decomposition, outages, requests."""

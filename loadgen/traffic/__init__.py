"""One request and what it carries: payloads, arrival schedules, the exchange and its validation, the run context."""

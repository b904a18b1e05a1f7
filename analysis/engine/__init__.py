"""DuckDB over the run folder: step statistics, tables, telemetry and series without loading the rows."""

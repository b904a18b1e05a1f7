"""`embedperf bench` (serve, run the ramp, report) and `embedperf search` (the capacity search's probes)."""

"""Command lines of the analysis: `embedperf capacity` and `embedperf synth`."""

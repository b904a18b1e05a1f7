"""`embedperf verify`: the four-layer release verdict (function and precision, performance, stability,
operations), each layer a module, its thresholds and the verdict shared."""

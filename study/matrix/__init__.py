"""`embedperf matrix`: the optimisation before/after matrix (its spec, the runs, the comparison report)."""

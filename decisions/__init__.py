"""Pure decision cores that the load side runs live and the analysis reads back from the run folder.

`search/`: the capacity search's state machine (which rate to probe next, each probe's verdict, the
record it leaves in the manifest); `canary_verdict`: a canary's per-window judgement and its stop rule.
They import only the ground (embedperf) and the scenario model, so loadgen (which drives them during a
run) and analysis (which rebuilds the same figures from a folder) both stand above them.
"""

"""`embedperf sweep`: the request-shape grid (inputs per request x users, optionally x text length).

`spec` (what to sweep, validated once) ► `runner` (one adaptive ramp per request shape) ► `report` (the cells
from the run folders, the best under the SLO, heatmaps and table in one HTML page, summary.json) ► `cli`.
"""

"""Drivers that decide when requests start: open-loop dispatch and the capacity-search probes."""

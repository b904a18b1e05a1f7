"""Derived figures: bootstrap intervals, capacity and knee, bottleneck, serving devices, health, soak, findings."""

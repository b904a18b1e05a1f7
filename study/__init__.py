"""The optimisation study: before/after matrix of service configurations and precision verification.

It composes every other stage (service, load generation, analysis, reports), so it sits on top of
them rather than inside one.
"""

"""Benchmarks the make targets run (`make bench-service`, `bench-recorder`, ...): each prints its figures.

The top layer of the project: a benchmark may drive any package (and the reference service in-process,
to measure its ceiling), and nothing of the product imports a benchmark. Run one as
`python -m benchmarks.<name>` from the repository root.
"""

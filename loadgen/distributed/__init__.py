"""Distributed mode: workers forward their row batches to the master, which writes the one run folder."""

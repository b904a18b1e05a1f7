"""In-memory (pandas) references of the analysis: the equality tests check the DuckDB engine against them."""

"""`embedperf precision`: a configuration's embeddings against fp32 (cosine, domains, retrieval agreement),
the gate, the layer view and the int8 advice, and their console and HTML reports."""

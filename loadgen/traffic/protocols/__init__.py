"""Target protocols: how one kind of server is asked for embeddings, sparse vectors or a ranking, and what a
good answer is. base.py declares the interface, registry.py names the protocols; one module per API family."""

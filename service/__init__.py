"""Reference embedding service: OpenAI-compatible /v1/embeddings over a dynamically batched model."""

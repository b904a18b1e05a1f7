"""Infinity (`infinity_emb v2`): OpenAI embeddings at /embeddings (below its --url-prefix, none by default), a
Cohere-shaped /rerank, and a model list owned by "infinity" whose ids are its served model names.

Its /metrics holds HTTP-level figures only, no queue or batch: the collectors find nothing of ours there."""

from __future__ import annotations

from loadgen.traffic.protocols.openai import OpenAIServerProtocol


class InfinityProtocol(OpenAIServerProtocol):
    name = "infinity"
    label = "infinity-style OpenAI"
    owner = "infinity"
    default_prefix = ""


PROTOCOL = InfinityProtocol()

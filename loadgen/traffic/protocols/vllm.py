"""vLLM's OpenAI-compatible server (also vllm-ascend): OpenAI embeddings under /v1, a Cohere-shaped /v1/rerank,
its model list owned by "vllm", and its own Prometheus names."""

from __future__ import annotations

from loadgen.traffic.protocols.openai import OpenAIServerProtocol


class VllmProtocol(OpenAIServerProtocol):
    name = "vllm"
    label = "vLLM OpenAI-compatible"
    owner = "vllm"
    metric_names = {
        "queue_depth": "vllm:num_requests_waiting", "request_rate_qps": "vllm:request_success_total",
        "tokens_per_s": "vllm:prompt_tokens_total",
    }


PROTOCOL = VllmProtocol()

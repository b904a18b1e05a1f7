"""Typed service configuration: one pydantic-settings model, read from EMBEDPERF_* env and CLI flags."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
Precision = Literal["fp32", "fp16", "bf16", "int8"]
LongInput = Literal["truncate", "reject"]
LogLevel = Literal["critical", "error", "warning", "info", "debug"]


class ServiceSettings(BaseSettings):
    """Every knob of the reference service; each optimisation is a switch so runs can compare them."""

    model_config = SettingsConfigDict(env_prefix="EMBEDPERF_", extra="ignore", protected_namespaces=())

    host: str = Field("127.0.0.1", description="Address to listen on.")
    port: int = Field(8086, ge=0, le=65535, description="TCP port to listen on (0 picks a free one).")
    model: str | None = Field(
        None,
        description="Local Hugging Face / sentence-transformers model directory (default: packaged all-MiniLM-L6-v2).",
    )
    model_name: str = Field(
        DEFAULT_MODEL_NAME, description="Model name served to clients; requests naming another model get 404."
    )
    device: str = Field("cpu", description="Inference device: cpu, cuda[:N] or npu[:N].")
    precision: Precision = Field(
        "fp32", description="Weights precision: fp32, fp16, bf16, or int8 (dynamic, CPU)."
    )
    int8_exclude: str = Field(
        "",
        description="Under int8: regex of Linear module names kept in fp32 "
        "(e.g. 'output\\.dense|intermediate' quantises only the attention projections).",
    )
    batching: bool = Field(
        True, description="Dynamic batching across requests (off: every request runs alone)."
    )
    max_batch_size: int = Field(32, ge=1, le=4096, description="Most inputs in one batch.")
    max_batch_tokens: int = Field(
        8192, ge=1, description="Most padded tokens (inputs x longest) in one batch."
    )
    max_wait_ms: float = Field(
        5.0,
        ge=0,
        description="Longest wait for a batch to fill after its first input, while more accepted inputs are still being tokenised.",
    )
    sort_by_length: bool = Field(True, description="Group inputs of similar token length to reduce padding.")
    overlap_tokenize: bool = Field(
        True, description="Tokenise in a separate thread, overlapping the next batch with compute."
    )
    cache_size: int = Field(0, ge=0, description="In-process LRU cache of embeddings, in entries (0 = off).")
    threads: int | None = Field(
        None, ge=1, description="torch intra-op threads (default: torch's own choice)."
    )
    queue_size: int = Field(
        1024, ge=1, description="Most inputs waiting for a batch; beyond it requests get 429."
    )
    deadline_ms: float = Field(
        30000.0, gt=0, description="Requests not done within this get 503; their queued work is skipped."
    )
    max_concurrency: int = Field(
        0, ge=0, description="Most embedding requests in flight (0 = no limit); else 429."
    )
    rate_limit_qps: float = Field(
        0.0, ge=0, description="Most embedding requests per second (0 = no limit); else 429."
    )
    long_input: LongInput = Field(
        "truncate", description="Inputs over the model's token limit: truncate or reject (413)."
    )
    max_inputs: int = Field(2048, ge=1, description="Most inputs in one request.")
    warmup: bool = Field(True, description="Run a warm-up batch before reporting ready.")
    log_level: LogLevel = Field("info", description="Log level of the service and uvicorn.")
    api_keys: str = Field(
        "",
        description="Comma-separated API keys; when set, POST /v1/embeddings needs 'Authorization: Bearer KEY'.",
    )

    @field_validator("device")
    @classmethod
    def _device_kind(cls, value: str) -> str:
        kind, _, index = value.partition(":")
        if kind not in ("cpu", "cuda", "npu") or (index and not index.isdigit()):
            raise ValueError(f"device {value!r} is not one of cpu, cuda[:N], npu[:N]")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    def api_key_list(self) -> list[str]:
        return [key.strip() for key in self.api_keys.split(",") if key.strip()]

    def public_config(self) -> dict[str, Any]:
        """The effective configuration shown in /info: everything except secrets."""
        config = self.model_dump(exclude={"api_keys"})
        config["auth_enabled"] = bool(self.api_key_list())
        return config

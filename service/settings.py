"""Typed service configuration: one pydantic-settings model, read from EMBEDPERF_* env and CLI flags, and the
serving-device list it holds (`--device npu:0,npu:1`, `--workers N` on CPU), parsed and checked once.

Kept free of torch so that settings validation and `--help` stay fast; modelcore/devices.py turns a device spec
into a torch.device. Indices are the ones npu-smi and NVML print, so a load generator can match /info's
`devices` against its telemetry. On CPU there is no device numbering: index is the worker number."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from modelcore.model_folder import DEFAULT_MODEL_NAME

Precision = Literal["fp32", "fp16", "bf16", "int8"]
LongInput = Literal["truncate", "reject"]
LogLevel = Literal["critical", "error", "warning", "info", "debug"]
GraphMode = Literal["auto", "on", "off"]
PinMode = Literal["auto", "on", "off"]


class ServiceSettings(BaseSettings):
    """Every knob of the reference service; each optimisation is a switch so runs can compare them."""

    model_config = SettingsConfigDict(
        env_prefix="EMBEDPERF_", extra="ignore", protected_namespaces=(), use_attribute_docstrings=True
    )

    host: str = "127.0.0.1"
    """Address to listen on."""
    port: int = Field(8086, ge=0, le=65535)
    """TCP port to listen on (0 picks a free one)."""
    model: str | None = None
    """Local Hugging Face / sentence-transformers model directory (default: packaged all-MiniLM-L6-v2)."""
    model_name: str = DEFAULT_MODEL_NAME
    """Model name served to clients; requests naming another model get 404."""
    device: str = "cpu"
    """Inference device(s): cpu, cuda[:N] or npu[:N]; a list such as npu:0,npu:1 runs one worker (and model
    replica) per device, requests balanced across them."""
    precision: Precision = "fp32"
    """Weights precision: fp32, fp16, bf16, or int8 (dynamic, CPU)."""
    int8_exclude: str = ""
    """Under int8: regex of Linear module names kept in fp32 (e.g. 'output\\.dense|intermediate' quantises
    only the attention projections)."""
    batching: bool = True
    """Dynamic batching across requests (off: every request runs alone)."""
    max_batch_size: int = Field(32, ge=1, le=4096)
    """Most inputs in one batch."""
    max_batch_tokens: int = Field(8192, ge=1)
    """Most padded tokens (inputs x longest) in one batch."""
    max_wait_ms: float = Field(5.0, ge=0)
    """Longest wait for a batch to fill after its first input, while more accepted inputs are still being
    tokenised or another batch computes (a free worker then gathers arrivals rather than taking each alone)."""
    graphs: GraphMode = "auto"
    """Device graphs: batches padded to a few (batch x length) buckets, each captured once at warm-up and
    replayed (CUDA graphs on cuda, NPUGraph on npu); auto = on for cuda/npu, off on cpu; off = eager, one
    launch per operator (for comparison)."""
    compile: bool = False
    """On cpu: torch.compile the model once per bucket shape at warm-up (slow to start, faster to serve)."""
    compute_sleep_ms: float = Field(0.0, ge=0, le=10_000)
    """Benchmarks only: the model does not compute; each batch sleeps this long and is answered unit vectors
    (the service's own cost, model compute taken out; make bench-split). 0: the model computes."""
    sort_by_length: bool = True
    """Group inputs of similar token length to reduce padding."""
    overlap_tokenize: bool = True
    """Tokenise in a separate thread, overlapping the next batch with compute."""
    cache_size: int = Field(0, ge=0)
    """In-process LRU cache of embeddings, in entries (0 = off)."""
    threads: int | None = Field(None, ge=1)
    """torch intra-op threads of the engine (default: the usable cores not taken by the HTTP front ends, at
    least 1; a busy neighbour then slows one thread instead of stalling them all)."""
    queue_size: int = Field(4096, ge=1)
    """Most inputs waiting for a batch; beyond it requests get 429 (must be >= max_inputs)."""
    deadline_ms: float = Field(5000.0, gt=0)
    """Requests not done within this get 503 deadline_exceeded; their queued work is skipped."""
    admit_wait_share: float = Field(0.5, gt=0, le=1)
    """Load shedding: a request whose estimated wait (until its last input is computed, from the work queued
    ahead of it and its own inputs) exceeds this share of deadline_ms gets an immediate 429 with Retry-After,
    so admitted requests finish within the deadline."""
    shutdown_grace_s: float = Field(10.0, gt=0)
    """On SIGTERM, how long requests in flight may take to finish before they are cut off (independent of
    deadline_ms); requests that arrive meanwhile get 503 shutting_down at once."""
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    """Largest request body; larger ones get 413 before (Content-Length) or while being read."""
    max_input_chars: int = Field(100_000, ge=1)
    """Longest input in characters, checked before tokenising: over it, reject mode answers 413 and truncate
    mode cuts the text (truncate mode also cuts to a margin above the token limit first)."""
    body_timeout_s: float = Field(10.0, gt=0)
    """Longest time to receive a request body; slower clients get 408."""
    max_header_bytes: int = Field(64 * 1024, ge=16 * 1024)
    """Largest request head (request line and headers); larger ones get 431 and their connection is closed as
    soon as that much has arrived (the head is read in blocks: one over half of this may be refused too)."""
    http_workers: int | None = Field(None, ge=0, le=64)
    """HTTP front-end processes (parsing, auth, admission, tokenising, JSON) in front of one engine process
    that computes; 0 serves HTTP and computes in one process (for debugging). Default: a quarter of the usable
    cores, at least 1 and at most 8."""
    pin_front_ends: PinMode = "auto"
    """on: each HTTP front end keeps its threads (event loop, HTTP server, ZeroMQ) on one CPU, the front ends
    spread over the usable CPUs from the last, so the GIL passes between its threads within one core (a quarter
    less CPU a request, make bench-split); auto = on unless the engine computes on this host's CPUs (device
    cpu), whose workers need the kernel free to move a front end off their cores; off: the kernel places them."""
    engine_restarts: int = Field(3, ge=0)
    """How many times the engine process is restarted after it ends unasked (its requests get 503 and /ready
    says so meanwhile); once they are spent the service exits with status 3."""
    keep_alive_timeout_s: float = Field(5.0, ge=0.001, le=60)
    """Idle keep-alive connections, and clients slower than this to send a request's head, are closed after
    this many seconds."""
    max_concurrency: int = Field(0, ge=0)
    """Most embedding requests in flight (0 = no limit); else 429."""
    rate_limit_qps: float = Field(0.0, ge=0)
    """Most embedding requests per second (0 = no limit); else 429."""
    long_input: LongInput = "truncate"
    """Inputs over the model's token limit: truncate or reject (413)."""
    max_inputs: int = Field(2048, ge=1)
    """Most inputs in one request; more get 400 too_many_inputs."""
    max_request_tokens: int = Field(8192, ge=1)
    """Most tokens (after truncation) in one request, summed over its inputs; more get 413 too_many_tokens,
    found while tokenising and before the request is computed."""
    warmup: bool = True
    """Run a warm-up batch before reporting ready."""
    log_level: LogLevel = "info"
    """Log level of the service."""
    api_keys: str = ""
    """Comma-separated API keys; when set, every endpoint but /health and /ready needs 'Authorization: Bearer
    KEY' (401 otherwise)."""
    api_keys_file: str | None = None
    """File holding the API keys (comma- or line-separated), read at start: keys neither on the command line
    (which `ps` shows) nor in the environment."""
    access_log: str = "-"
    """Where the JSON access log goes, one line per request: '-' (stderr), a file path, or 'off'."""
    workers: int | None = Field(None, ge=1, le=64)
    """Inference worker threads on CPU, each computing whole batches from the one queue (default: one per
    usable core on one torch thread, the first taking every core for a batch alone on an idle host; one with
    --http-workers 0; on cuda/npu list devices in --device instead: one worker per device)."""
    cpu_worker_replicas: bool = False
    """With --workers N on CPU: every worker gets its own model copy instead of sharing one."""
    cache: str = ""
    """Shared result cache redis://HOST:PORT/DB (empty = off); while Redis is down the service computes
    everything and says so in /health and /metrics."""
    cache_ttl_s: int = Field(86400, ge=0)
    """Expiry of Redis cache entries in seconds (0 = none)."""
    cache_retry_max_s: float = Field(5.0, gt=0)
    """Longest wait between reconnection attempts while Redis is down."""

    fallback_model: str | None = None
    """Lighter model directory that serves new requests while the device stays busy (see
    fallback_busy_threshold); it must give vectors of the main model's dimension."""
    fallback_precision: Precision | None = None
    """Precision of the fallback: alone, the main model at this precision (e.g. int8) is the fallback; with
    fallback_model, that model's precision (default: precision)."""
    fallback_busy_threshold: float = Field(0.9, gt=0, le=1)
    """With a fallback: new requests go to it while the busy fraction over the last fallback_window_s is at or
    above this, and to the main model again once it is below."""
    fallback_window_s: float = Field(10.0, gt=0)
    """With a fallback: the window the busy fraction is averaged over, and the least time between two
    switches."""

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    def device_specs(self) -> list[DeviceSpec]:
        """One spec per inference worker (see `serving_devices`)."""
        return serving_devices(self.device, self.workers or 1)

    def engine_workers(self) -> int | None:
        """CPU workers of an engine process of its own: --workers, else one per usable core (independent
        batches on one thread each: no thread waits at another's barrier, so a busy neighbour slows one
        batch instead of all). None on an accelerator (one worker per listed device)."""
        if self.workers is not None or self.device_specs()[0].kind != "cpu":
            return self.workers
        return usable_cores()

    @model_validator(mode="after")
    def _consistent(self) -> ServiceSettings:
        kind = self.device_specs()[0].kind  # the device list parses, or says what is wrong with it
        if self.cache and not self.cache.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"cache {self.cache!r} is not a Redis URL; write redis://HOST:PORT/DB")
        if self.graphs == "on" and kind == "cpu":
            raise ValueError("graphs on needs a cuda or npu device; on cpu use --compile (or --graphs auto)")
        if self.compile and kind != "cpu":
            raise ValueError("compile applies on cpu; on cuda/npu the device graphs (--graphs) do its work")
        if self.max_inputs > self.queue_size:
            raise ValueError(
                f"max_inputs ({self.max_inputs}) exceeds queue_size ({self.queue_size}): a request that large "
                "could never be admitted; raise --queue-size or lower --max-inputs"
            )
        if self.api_keys_file and not Path(self.api_keys_file).is_file():
            raise ValueError(f"api_keys_file {self.api_keys_file} is not a readable file; pass the path to one")
        if (self.api_keys.strip() or self.api_keys_file) and not self.api_key_list():
            raise ValueError(
                "api_keys holds only commas or whitespace, which would switch authentication off; "
                "give at least one key (KEY1,KEY2) or leave it unset to run without auth"
            )
        if self.fallback_model is None and self.fallback_precision == self.precision:
            raise ValueError(
                f"fallback_precision {self.fallback_precision} is the main model's own precision: the fallback "
                "would be the main model; give a lighter precision (e.g. int8) or --fallback-model PATH"
            )
        return self

    def fallback_model_id(self) -> str | None:
        """What responses name the fallback's vectors by: its folder's name, or `<model_name>@<precision>`."""
        if self.fallback_model is not None:
            name = Path(self.fallback_model).name
            return f"{name}@{self.fallback_precision}" if self.fallback_precision else name
        if self.fallback_precision is not None:
            return f"{self.model_name}@{self.fallback_precision}"
        return None

    def front_ends_pinned(self) -> bool:
        """Whether each front end runs on one CPU (--pin-front-ends; auto: the device computes, or nothing does)."""
        computes_on_cpu = self.device_specs()[0].kind == "cpu" and not self.compute_sleep_ms
        return self.pin_front_ends == "on" or (self.pin_front_ends == "auto" and not computes_on_cpu)

    def graphs_on(self) -> bool:
        """Whether batches replay captured device graphs (on an accelerator, unless --graphs off)."""
        accelerator = self.device_specs()[0].kind != "cpu"
        return self.graphs == "on" or (self.graphs == "auto" and accelerator)

    def front_end_count(self) -> int:
        """HTTP front-end processes: --http-workers, or a quarter of the usable cores (1 to 8)."""
        if self.http_workers is not None:
            return self.http_workers
        return max(1, min(8, usable_cores() // 4))

    def engine_threads(self) -> int:
        """torch threads of the engine: --threads, else the cores front ends leave, within OMP_NUM_THREADS."""
        if self.threads:
            return self.threads
        if (self.workers or 1) > 1:  # several CPU workers: one thread each
            return 1
        threads = max(1, usable_cores() - self.front_end_count())
        cap = os.environ.get("OMP_NUM_THREADS", "")
        return min(threads, int(cap)) if cap.isdigit() and int(cap) > 0 else threads

    def api_key_list(self) -> list[str]:
        """The keys of --api-keys (EMBEDPERF_API_KEYS) and of --api-keys-file together."""
        text = self.api_keys
        if self.api_keys_file:
            text += "," + Path(self.api_keys_file).read_text().replace("\n", ",")
        return [key.strip() for key in text.split(",") if key.strip()]

    def log_to_stderr(self, process: str = "") -> None:
        """Log at --log-level to stderr, each line tagged with the process that wrote it (engine[pid])."""
        logging.basicConfig(
            level=self.log_level.upper(), format=f"%(asctime)s %(levelname)s {process}%(name)s: %(message)s"
        )

    def public_config(self) -> dict[str, Any]:
        """The effective configuration shown in /info: everything except secrets."""
        config = self.model_dump(exclude={"api_keys"})
        return {**config, "cache": redact_url(self.cache), "auth_enabled": bool(self.api_key_list())}


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, as a container's cpuset limits it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def redact_url(url: str) -> str:
    """A URL without its password, for /info and logs."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user + ':' if user else ':'}***@{host}"


DEVICE_KINDS = ("cpu", "cuda", "npu")


@dataclass(frozen=True)
class DeviceSpec:
    kind: str
    index: int
    name: str

    def as_info(self) -> dict[str, str | int]:
        """The /info `devices` item: {kind, index, name}."""
        return {"kind": self.kind, "index": self.index, "name": self.name}


def _parse_one(entry: str) -> DeviceSpec:
    kind, colon, index_text = entry.partition(":")
    if kind not in DEVICE_KINDS or (colon and not index_text.isdigit()):
        raise ValueError(f"device {entry!r} is not one of cpu, cuda[:N], npu[:N]")
    if kind == "cpu" and colon:
        raise ValueError(f"device {entry!r}: cpu takes no index; use --workers N for several CPU workers")
    index = int(index_text) if colon else 0
    return DeviceSpec(kind, index, f"{kind}:{index}")


def parse_device_list(text: str) -> list[DeviceSpec]:
    """'npu:0,npu:1' -> two specs; refuses empty entries, duplicates and mixed kinds with what to do."""
    entries = [entry.strip() for entry in text.split(",")]
    if not all(entries):
        raise ValueError(f"device list {text!r} has an empty entry; write e.g. npu:0,npu:1")
    specs = [_parse_one(entry) for entry in entries]
    kinds = sorted({spec.kind for spec in specs})
    if len(kinds) > 1:
        raise ValueError(
            f"device list {text!r} mixes kinds ({', '.join(kinds)}); one service serves from one kind "
            "of device, start one service per kind"
        )
    names = [spec.name for spec in specs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(
            f"device list {text!r} names {', '.join(repeated)} more than once "
            "('npu' means npu:0); list each device once"
        )
    return specs


def serving_devices(text: str, workers: int) -> list[DeviceSpec]:
    """One spec per inference worker: the listed accelerators, or `workers` CPU workers cpu:0..N-1."""
    specs = parse_device_list(text)
    if specs[0].kind == "cpu":
        return [DeviceSpec("cpu", i, f"cpu:{i}") for i in range(workers)]
    if workers != 1:
        raise ValueError(
            f"--workers {workers} applies to CPU only; on {specs[0].kind} the service runs one worker per "
            f"listed device, e.g. --device {specs[0].kind}:0,{specs[0].kind}:1"
        )
    return specs

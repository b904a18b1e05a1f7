"""`embedperf serve` / `python -m service`: flags mirror ServiceSettings fields and override EMBEDPERF_* env."""

from __future__ import annotations

import argparse
import errno
import socket
import sys
import types
import typing
from typing import Any

from pydantic import ValidationError

from embedperf.errors import ConfigError, EmbedperfError
from service import http_server
from service.settings import ServiceSettings, redact_url
from service.supervisor import Supervisor


def _field_type(annotation: Any) -> tuple[Any, tuple[Any, ...] | None]:
    """(argparse type, choices) for a settings annotation such as int | None or Literal[...]."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _field_type(args[0])
    if origin is typing.Literal:
        return str, tuple(typing.get_args(annotation))
    return (annotation if annotation in (int, float, str) else str), None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="embedperf serve",
        description="Reference OpenAI-compatible embedding service with dynamic batching. "
        "Every flag can also be set as EMBEDPERF_<FLAG> (upper case, '-' -> '_'); flags win.",
    )
    for name, info in ServiceSettings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        default = info.default
        help_text = f"{info.description} (default: {default if default not in (None, '') else 'unset'})"
        if name == "api_keys":
            help_text = f"{info.description} (prefer the EMBEDPERF_API_KEYS env variable)"
        kind: dict[str, Any] = {"action": argparse.BooleanOptionalAction}
        if info.annotation is not bool:
            arg_type, choices = _field_type(info.annotation)
            kind = {"type": arg_type, "choices": choices, "metavar": "PATH" if name == "model" else None}
        parser.add_argument(flag, default=argparse.SUPPRESS, help=help_text, **kind)
    return parser


def _problem(loc: tuple[int | str, ...], message: str) -> str:
    message = message.removeprefix("Value error, ")
    return f"{'.'.join(map(str, loc))}: {message}" if loc else message


def settings_from_args(argv: list[str]) -> ServiceSettings:
    args = build_parser().parse_args(argv)
    try:
        return ServiceSettings(**vars(args))
    except ValidationError as exc:
        problems = "; ".join(_problem(e["loc"], e["msg"]) for e in exc.errors())
        raise ConfigError(f"invalid service settings: {problems}") from None


def check_port_free(host: str, port: int) -> None:
    """Refuse a busy port in a second, before the model loads (the server would fail only after loading)."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is free
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"port {port} on {host} is in use; pass --port N") from None
            raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror}); pass --host/--port") from None


def serve(settings: ServiceSettings) -> int:
    check_port_free(settings.host, settings.port)
    settings.log_to_stderr()
    if settings.front_end_count() > 0:
        return Supervisor(settings).run()
    return serve_in_one_process(settings)


def serve_in_one_process(settings: ServiceSettings) -> int:
    """--http-workers 0: HTTP and compute in this process (for debugging; the engine shares the GIL)."""
    import uvloop

    # torch and transformers load after the port check: a taken port is reported at once, not after ~5 s
    from service.local_app import create_app
    from service.local_engine import load_main_model

    # Load before listening so a missing device runtime or model exits at once with its message;
    # /ready stays 503 until the warm-up batch has run.
    model = load_main_model(settings)
    with http_server.reserve_port(settings.host, settings.port) as holder:
        settings = settings.model_copy(update={"port": holder.getsockname()[1]})
        uvloop.run(http_server.serve(settings, create_app(settings, model, freeze_heap=True)))
    return 0


def warn_secrets_on_command_line(argv: list[str]) -> None:
    """Say so when a secret was given as a flag: every user of the host can read it in `ps`."""
    for i, arg in enumerate(argv):
        name, _, value = arg.partition("=")
        value = value or (argv[i + 1] if i + 1 < len(argv) else "")
        if name == "--api-keys":
            secret, instead = "--api-keys", "EMBEDPERF_API_KEYS or --api-keys-file FILE"
        elif name == "--cache" and redact_url(value) != value:
            secret, instead = "the password in --cache", "EMBEDPERF_CACHE"
        else:
            continue
        warning = f"{secret} is visible to every user of this host (ps); set {instead} instead"
        print(f"embedperf serve: warning: {warning}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        warn_secrets_on_command_line(args)
        return serve(settings_from_args(args))
    except EmbedperfError as exc:
        print(f"embedperf serve: error: {exc}", file=sys.stderr)
        return exc.exit_code

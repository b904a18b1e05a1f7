"""`embedperf serve` / `python -m service`: flags mirror ServiceSettings fields and override EMBEDPERF_* env."""

from __future__ import annotations

import argparse
import errno
import logging
import socket
import sys
import types
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from embedperf.errors import ConfigError, EmbedperfError
from service.settings import ServiceSettings

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI


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
        if info.annotation is bool:
            parser.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=help_text
            )
            continue
        arg_type, choices = _field_type(info.annotation)
        metavar = "PATH" if name == "model" else None
        parser.add_argument(
            flag, type=arg_type, choices=choices, default=argparse.SUPPRESS, help=help_text, metavar=metavar
        )
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
    """Refuse a busy port in a second, before the model loads (uvicorn would fail only after loading)."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is free
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"port {port} on {host} is in use; pass --port N") from None
            raise ConfigError(
                f"cannot listen on {host}:{port} ({exc.strerror}); pass --host/--port"
            ) from None


def uvicorn_config(settings: ServiceSettings, app: FastAPI) -> uvicorn.Config:
    """uvicorn's settings for the app: stock HTTP protocol, no access log of its own (the app writes one),
    and a shutdown grace of its own (--shutdown-grace-s) after which requests still running are cancelled."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        lifespan="on",
        access_log=False,
        timeout_keep_alive=max(1, round(settings.keep_alive_timeout_s)),
        timeout_graceful_shutdown=max(1, round(settings.shutdown_grace_s)),
    )


def serve(settings: ServiceSettings) -> int:
    import uvicorn

    check_port_free(settings.host, settings.port)

    # torch and transformers load after the port check: a taken port is reported at once, not after ~5 s
    from service.app import create_app
    from service.model import load_model
    from service.workers import primary_device

    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )

    # Load before listening so a missing device runtime or model exits at once with its message;
    # /ready stays 503 until the warm-up batch has run.
    model = load_model(
        Path(settings.model) if settings.model else None,
        primary_device(settings),
        settings.precision,
        settings.threads,
        int8_exclude=settings.int8_exclude,
    )
    app = create_app(settings, model, freeze_heap=True)
    config = uvicorn_config(settings, app)
    uvicorn.Server(config).run()
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return serve(settings_from_args(list(sys.argv[1:] if argv is None else argv)))
    except EmbedperfError as exc:
        print(f"embedperf serve: error: {exc}", file=sys.stderr)
        return exc.exit_code

"""The `embedperf agent` token: read from a file or the environment, so it never has to sit on a command
line, where `ps` and /proc/PID/cmdline show it to every user of the host.

The agent and the run that pulls from it read it the same way: a token file first (`--token-file` on the
agent, `--agent-token-file` on the run), else `EMBEDPERF_AGENT_TOKEN`. An empty token (an empty file, an
empty variable, surrounding whitespace only) counts as no token at all: it never switches authentication on
with a secret everybody knows.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from embedperf.errors import ConfigError

TOKEN_ENV = "EMBEDPERF_AGENT_TOKEN"


def read_token_file(path: Path) -> str | None:
    """The token in `path` (surrounding whitespace and the trailing newline dropped); None when empty."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read the agent token file {path}: {exc.strerror or exc}; write the token into a file "
            f"readable by this user only (chmod 600) or set {TOKEN_ENV}"
        ) from exc
    return text.strip() or None


def resolve_token(token_file: Path | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The token from `token_file` when given, else from EMBEDPERF_AGENT_TOKEN; None when there is none."""
    if token_file is not None:
        return read_token_file(token_file)
    value = (os.environ if environ is None else environ).get(TOKEN_ENV, "")
    return value.strip() or None


def bearer_headers(token: str | None) -> dict[str, str]:
    """The request headers that carry `token` (none without one)."""
    return {"Authorization": f"Bearer {token}"} if token else {}

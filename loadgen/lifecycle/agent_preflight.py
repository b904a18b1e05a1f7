"""Pre-flight for `--agent`: an agent that refuses the run's token stops the run before any load (exit 2).

A refused token is a wrong secret, not an outage: the run would otherwise measure for its whole length, pull
nothing and record "agent never answered". An agent that does not answer at all is left to the run, which
retries and lists the seconds without samples (collectors.agent_pull), since it may still come up."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from collectors.agent_pull import check_agent, refused_message
from collectors.agent_token import resolve_token
from embedperf.errors import TargetError


def check_agents(agents: Sequence[str], token_file: str | None) -> None:
    """Ask each agent's /time with the token the run will send; TargetError naming every agent that answers 401."""
    if not agents:
        return
    token = resolve_token(Path(token_file) if token_file else None)
    refused = [reason for url in agents if (reason := check_agent(url, token)) == refused_message(url)]
    if refused:
        raise TargetError("; ".join(refused))

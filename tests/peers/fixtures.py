"""Session-scoped fixtures for the real third-party servers; tests/conftest.py imports them for every test.

Each server starts once per test session (per xdist worker) from its `.peers/` environment, serving the
packaged all-MiniLM-L6-v2 folder, and is stopped by PID at the end. A missing environment or a server
that does not come up fails the test that asked for it with the server's own output, never a skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.peers.launch import (
    VLLM_STYLE_MODEL_NAMES,
    PeerProcess,
    infinity_command,
    kserve_command,
)

PEER_FIXTURES = frozenset({"infinity_server", "infinity_vllm_style_server", "kserve_server"})


def packaged_model_dir() -> Path:
    """The packaged all-MiniLM-L6-v2 folder. service.model brings torch, so it is imported only when a
    peer server is asked for, not by every test session that loads tests/conftest.py."""
    from service.model import default_model_path

    return default_model_path()


@pytest.fixture(scope="session")
def infinity_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerProcess]:
    """Infinity as it starts by default: `/embeddings`, `/models`, the model id derived from the folder."""
    log_path = tmp_path_factory.mktemp("infinity") / "infinity.log"
    with PeerProcess(infinity_command(packaged_model_dir()), log_path) as peer:
        yield peer


@pytest.fixture(scope="session")
def infinity_vllm_style_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerProcess]:
    """Infinity laid out as vLLM's OpenAI server (`/v1/embeddings`, `/v1/models`) under names embedperf is
    not told (VLLM_STYLE_MODEL_NAMES); a request naming another model is refused."""
    log_path = tmp_path_factory.mktemp("infinity-vllm-style") / "infinity.log"
    command = infinity_command(
        packaged_model_dir(), served_model_names=VLLM_STYLE_MODEL_NAMES, url_prefix="/v1"
    )
    with PeerProcess(command, log_path) as peer:
        yield peer


@pytest.fixture(scope="session")
def kserve_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerProcess]:
    """KServe's model server, Open Inference Protocol v2 REST, model `minilm` (tests/peers/kserve_minilm.py)."""
    log_path = tmp_path_factory.mktemp("kserve") / "kserve.log"
    with PeerProcess(kserve_command(packaged_model_dir()), log_path) as peer:
        yield peer

"""Session-scoped fixtures for the real third-party servers; tests/conftest.py imports them for every test.

Each server starts once per test session, shared by every xdist worker (tests/peers/shared.py), from its
`.peers/` environment, serving the packaged all-MiniLM-L6-v2 folder, and is stopped by PID at the end of
the session. A missing environment or a server that does not come up fails the test that asked for it
with the server's own output, never a skip.
"""

from __future__ import annotations

import pytest

from benchmarks.peer_launch import (
    VLLM_STYLE_MODEL_NAMES,
    PeerCommand,
    infinity_command,
)
from modelcore.model_folder import default_model_path
from tests.peers.kserve_launch import kserve_command
from tests.peers.shared import SharedPeer, shared_peer

PEER_FIXTURES = frozenset({"infinity_server", "infinity_vllm_style_server", "kserve_server"})


def _infinity() -> PeerCommand:
    return infinity_command(default_model_path())


def _infinity_vllm_style() -> PeerCommand:
    return infinity_command(default_model_path(), served_model_names=VLLM_STYLE_MODEL_NAMES, url_prefix="/v1")


def _kserve() -> PeerCommand:
    return kserve_command(default_model_path())


@pytest.fixture(scope="session")
def infinity_server() -> SharedPeer:
    """Infinity as it starts by default: `/embeddings`, `/models`, the model id derived from the folder."""
    return shared_peer("infinity", _infinity)


@pytest.fixture(scope="session")
def infinity_vllm_style_server() -> SharedPeer:
    """Infinity laid out as vLLM's OpenAI server (`/v1/embeddings`, `/v1/models`) under names embedperf is
    not told (VLLM_STYLE_MODEL_NAMES); a request naming another model is refused."""
    return shared_peer("infinity-vllm-style", _infinity_vllm_style)


@pytest.fixture(scope="session")
def kserve_server() -> SharedPeer:
    """KServe's model server, Open Inference Protocol v2 REST, model `minilm` (tests/peers/kserve_minilm.py)."""
    return shared_peer("kserve", _kserve)

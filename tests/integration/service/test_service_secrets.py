"""Secrets stay off the command line, /health says only "alive" to a caller without a key, and the OpenAI
models list is served."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelcore.model import EmbeddingModel, load_model
from service.cli import main, warn_secrets_on_command_line
from service.settings import ServiceSettings
from tests.integration.service.test_service_api import MODEL, run, serving


@pytest.fixture(scope="module")
def minilm() -> EmbeddingModel:
    return load_model()


def test_keys_from_a_file_protect_every_endpoint_but_a_bare_health(
    tmp_path: Path, minilm: EmbeddingModel
) -> None:
    keys = tmp_path / "keys"
    keys.write_text("first-key\nsecond-key\n")
    settings = ServiceSettings(api_keys_file=str(keys), cache_size=10)

    async def go() -> None:
        async with serving(settings, minilm) as client:
            assert (await client.get("/health")).json() == {"status": "ok"}
            detailed = await client.get("/health", headers={"Authorization": "Bearer second-key"})
            assert detailed.json()["ready"] is True and "queue_depth" in detailed.json()
            assert (await client.get("/info")).status_code == 401
            models = await client.get("/v1/models", headers={"Authorization": "bearer first-key"})
            assert MODEL in [entry["id"] for entry in models.json()["data"]]
            info = await client.get("/info", headers={"Authorization": "Bearer first-key"})
            assert info.status_code == 200 and "second-key" not in info.text

    run(go)


def test_secrets_on_the_command_line_are_named_with_their_alternative(
    capsys: pytest.CaptureFixture[str],
) -> None:
    warn_secrets_on_command_line(["--api-keys", "k1", "--cache=redis://user:pw@host:6379/0"])
    err = capsys.readouterr().err
    assert "EMBEDPERF_API_KEYS or --api-keys-file" in err and "EMBEDPERF_CACHE" in err and "pw" not in err
    warn_secrets_on_command_line(["--cache", "redis://host:6379/0"])
    assert capsys.readouterr().err == ""


def test_a_missing_keys_file_stops_before_loading(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["--api-keys-file", str(tmp_path / "absent"), "--port", "0"]) == 2
    assert "api_keys_file" in capsys.readouterr().err

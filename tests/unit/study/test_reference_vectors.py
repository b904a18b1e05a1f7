"""The fp32 reference vectors' cache: computed once, read back equal, computed afresh when the model's
files or the texts change, skipped when off or when its folder cannot be written."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from embedperf.cache_folder import CACHE_ENV
from study.reference_vectors import fp32_reference_vectors

TEXTS = ["an apple", "一个苹果", "a much longer text about apples and pears"]


class Encoder:
    """Counts the times the vectors are computed."""

    def __init__(self, dim: int = 4) -> None:
        self.calls = 0
        self.dim = dim

    def __call__(self) -> np.ndarray:
        self.calls += 1
        return np.random.default_rng(self.calls).random((len(TEXTS), self.dim), dtype=np.float32)


@pytest.fixture
def model(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "config.json").write_text("{}", encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "1_Pooling" / "config.json").write_text("{}", encoding="utf-8")
    return folder


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(folder))
    return folder


def test_computed_once_then_read_back_equal(model: Path, cache: Path) -> None:
    encode = Encoder()
    first = fp32_reference_vectors(model, TEXTS, encode)
    second = fp32_reference_vectors(model, TEXTS, encode)
    assert encode.calls == 1
    assert second.dtype == np.float32 and np.array_equal(first, second)
    assert sorted(p.suffix for p in cache.iterdir()) == [".lock", ".npy"]  # no partial file left behind


def test_a_changed_weight_file_or_text_is_computed_afresh(model: Path, cache: Path) -> None:
    encode = Encoder()
    fp32_reference_vectors(model, TEXTS, encode)
    (model / "model.safetensors").write_bytes(b"other weights")
    fp32_reference_vectors(model, TEXTS, encode)
    assert encode.calls == 2
    fp32_reference_vectors(model, [*TEXTS[:2], TEXTS[2] + "!"], encode)
    assert encode.calls == 3
    os.utime(model / "1_Pooling" / "config.json", ns=(1, 1))  # a file in a subfolder counts too
    fp32_reference_vectors(model, TEXTS, encode)
    assert encode.calls == 4


def test_a_damaged_cache_file_is_computed_again(model: Path, cache: Path) -> None:
    encode = Encoder()
    fp32_reference_vectors(model, TEXTS, encode)
    [kept] = cache.glob("*.npy")
    kept.write_bytes(b"not an array")
    again = fp32_reference_vectors(model, TEXTS, encode)
    assert encode.calls == 2 and again.shape == (len(TEXTS), 4)


def test_off_computes_every_time(model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, "off")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    encode = Encoder()
    fp32_reference_vectors(model, TEXTS, encode)
    fp32_reference_vectors(model, TEXTS, encode)
    assert encode.calls == 2 and not (tmp_path / "home").exists()


def test_an_unwritable_cache_warns_and_still_answers(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))  # a folder under a file cannot be made
    with caplog.at_level(logging.WARNING, logger="study.reference_vectors"):
        vectors = fp32_reference_vectors(model, TEXTS, Encoder())
    assert vectors.shape == (len(TEXTS), 4)
    assert "cannot keep reference vectors" in caplog.text and f"{CACHE_ENV}=off" in caplog.text


def test_the_default_folder_follows_xdg_cache_home(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    fp32_reference_vectors(model, TEXTS, Encoder())
    assert len(list((tmp_path / "xdg" / "embedperf").glob("fp32-*.npy"))) == 1


def test_processes_that_need_the_same_vectors_at_once_compute_them_once(model: Path, cache: Path) -> None:
    """Two callers at once (each its own open file, as two processes): the second waits on the first's lock."""
    started, results = threading.Event(), []
    calls: list[float] = []

    def slow_encode() -> np.ndarray:
        calls.append(time.monotonic())
        started.set()
        time.sleep(0.5)  # long enough for the second caller to reach the lock while this one computes
        return np.full((len(TEXTS), 4), 0.25, dtype=np.float32)

    first = threading.Thread(target=lambda: results.append(fp32_reference_vectors(model, TEXTS, slow_encode)))
    first.start()
    assert started.wait(10)
    second = fp32_reference_vectors(model, TEXTS, slow_encode)
    first.join(10)
    assert len(calls) == 1 and len(results) == 1
    assert np.array_equal(results[0], second) and float(second[0, 0]) == 0.25

"""Report templates compiled once into the cache folder, read back by the next process, never a failure."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest

from embedperf.cache_folder import CACHE_ENV
from reports import render

TEMPLATE = "compare.html.j2"


def fresh_environment() -> jinja2.Environment:
    """What a new process builds: the cached environment is per process, so clear it first."""
    render.environment.cache_clear()
    return render.environment()


@pytest.fixture(autouse=True)
def _new_environment_after_each_test():
    yield
    render.environment.cache_clear()


def test_a_compiled_template_is_kept_and_the_next_process_does_not_compile_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    first = fresh_environment()
    first.get_template(TEMPLATE)
    kept = list((tmp_path / "jinja").glob("*.cache"))
    assert len(kept) >= 1

    second = fresh_environment()
    compiled: list[str] = []
    original = second.compile

    def counting_compile(source, name=None, filename=None, raw=False, defer_init=False):  # type: ignore[no-untyped-def]
        compiled.append(name)
        return original(source, name, filename, raw, defer_init)

    monkeypatch.setattr(second, "compile", counting_compile)
    second.get_template(TEMPLATE)
    assert TEMPLATE not in compiled  # read from the bytecode cache


def test_an_edited_template_is_compiled_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "t.j2").write_text("one {{ x }}", encoding="utf-8")
    cache = render.bytecode_cache()
    assert cache is not None

    def rendered() -> str:
        return (
            jinja2.Environment(loader=jinja2.FileSystemLoader(templates), bytecode_cache=cache)
            .get_template("t.j2")
            .render(x=1)
        )

    assert rendered() == "one 1"
    (templates / "t.j2").write_text("two {{ x }}", encoding="utf-8")
    assert rendered() == "two 1"


def test_the_cache_off_compiles_in_every_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, "off")
    assert render.bytecode_cache() is None
    assert fresh_environment().get_template(TEMPLATE) is not None


def test_a_cache_file_that_cannot_be_written_does_not_fail_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    env = fresh_environment()
    cache = env.bytecode_cache
    assert isinstance(cache, render.BestEffortBytecodeCache)
    cache.directory = str(tmp_path / "gone")  # as if the folder were removed while the process runs
    assert env.get_template(TEMPLATE) is not None
    assert not (tmp_path / "gone").exists()


def test_a_cache_folder_that_cannot_be_made_means_no_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv(CACHE_ENV, str(blocker))
    assert render.bytecode_cache() is None
    assert fresh_environment().get_template(TEMPLATE) is not None

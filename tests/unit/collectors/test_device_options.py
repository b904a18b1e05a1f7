"""Device options reach the collectors the same way from every front end; remote targets keep local
device sources out unless asked; an agent's missing seconds are counted on its own tick grid."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from collectors.agent_pull import missing_seconds, seconds_ranges
from collectors.cli import build_sources, config_from_args
from collectors.options import DeviceOptions, add_device_options
from embedperf.errors import ConfigError


def parse(*argv: str) -> DeviceOptions:
    parser = argparse.ArgumentParser()
    add_device_options(parser)
    return DeviceOptions.from_namespace(parser.parse_args(list(argv)))


def test_options_round_trip_to_collector_and_locust_arguments() -> None:
    opts = parse(
        "--devices", "3,5", "--npu-ids", "3,4,5", "--npu-smi", "/opt/npu-smi", "--prometheus-url",
        "http://prom:9090", "--agent", "http://a:9187/", "--agent", "http://b:9187", "--local-devices",
    )  # fmt: skip
    assert opts.devices == [3, 5] and opts.agents == ["http://a:9187", "http://b:9187"]
    assert opts.collector_args() == [
        "--npu-ids", "3,4,5", "--npu-smi", "/opt/npu-smi", "--prometheus-url", "http://prom:9090", "--local-devices",
    ]  # fmt: skip
    assert parse(*opts.command_args()) == opts


@pytest.mark.parametrize(
    ("argv", "message"),
    [(("--devices", "3;5"), "--devices"), (("--agent", "svc:9187"), "needs a scheme")],
)
def test_bad_options_say_what_to_do(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse(*argv)


def test_local_device_sources_only_for_a_local_target(tmp_path: Path) -> None:
    def npu_status(*argv: str) -> tuple[str, str]:
        config = config_from_args(["--out", str(tmp_path), *argv])
        source = next(s for s in build_sources(config) if s.name == "npu_smi")
        return source.status.state, source.status.reason

    state, reason = npu_status("--service-url", "http://10.255.0.9:8086", "--npu-smi", "/bin/true")
    assert state == "skipped" and "embedperf agent" in reason and "--local-devices" in reason
    state, reason = npu_status(
        "--service-url", "http://10.255.0.9:8086", "--npu-smi", "/bin/true", "--local-devices"
    )
    assert "another host" not in reason
    state, reason = npu_status("--service-url", "http://127.0.0.1:8086", "--npu-smi", "/bin/true")
    assert "another host" not in reason


def test_missing_seconds_follow_the_agents_tick_grid() -> None:
    """Ticks are whole seconds of the agent's clock; a 60 us offset must not move a tick into the
    previous second, and a 2.25 s one reports the gap in our seconds."""
    assert missing_seconds(set(range(10, 18)), 9.3, 17.9, offset_s=0.00006) == []
    assert missing_seconds({13, 14, 17}, 10.2, 16.0, offset_s=2.25) == [12, 13, 15]  # ticks 15, 16, 18
    assert missing_seconds(set(), 10.2, 12.5, offset_s=0.0) == [11, 12]
    assert seconds_ranges([10, 11, 12, 20, 22, 23]) == "10-12, 20, 22-23"

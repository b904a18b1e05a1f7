"""Help texts say what the README says: Locust's --help lists our options, every CLI option has help,
`make help` lists every variable with its value, `embedperf report` takes the newest run by default."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from analysis.cli.synth import synthesize

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
EMBEDPERF = [sys.executable, "-m", "embedperf.cli"]
MAKE_INTERNAL = {"PY", "EP", "STAMP", "MAKEFILE_LIST", "SHELL", "HOME", "MAKE"}  # HOME: the environment's, not ours


def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)


def test_locust_embedperf_help_lists_embedperf_options() -> None:
    proc = run([str(VENV_BIN / "locust"), "-f", "locustfiles/ramp.py", "--embedperf-help"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--scenario-profile" in proc.stdout
    for option in (
        "--scenario NAME|PATH",
        "--set KEY=VALUE",
        "--runs-dir",
        "--metrics-port",
        "--no-collectors",
    ):
        assert option in proc.stdout
    # Locust's own --profile stays Locust's; ours is only --scenario-profile
    assert re.search(r"--profile PROFILE\s+Set a profile to group", proc.stdout)


def test_collect_help_names_the_embedperf_command() -> None:
    proc = run([*EMBEDPERF, "collect", "--help"])
    assert proc.returncode == 0 and proc.stdout.startswith("usage: embedperf collect")


def test_every_bench_option_has_help() -> None:
    from study.bench.cli import build_parser

    missing = [a.option_strings for a in build_parser()._actions if not a.help]
    assert missing == []


def test_make_help_expands_values_and_lists_every_variable() -> None:
    proc = run(["make", "-s", "help"])
    assert proc.returncode == 0, proc.stderr
    assert "$(" not in proc.stdout
    assert "127.0.0.1:8086" in proc.stdout
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    used = set(re.findall(r"\$\((?:if |or )?\$\(([A-Z_0-9]+)\)", makefile)) | set(
        re.findall(r"\$\(([A-Z][A-Z_0-9]+)\)", makefile)
    )
    for variable in sorted(used - MAKE_INTERNAL):
        assert f"{variable}=" in proc.stdout, f"make help does not list {variable}"


def test_report_without_a_run_dir_uses_the_newest_run_and_says_so(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    synthesize(runs / "20260101T000000Z-ramp", n_requests=400, n_devices=1, hours=0.01)
    newest = synthesize(runs / "20260102T000000Z-ramp", n_requests=400, n_devices=1, hours=0.01)
    proc = run([*EMBEDPERF, "report", "--runs-dir", str(runs)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"using the newest run: {newest.root}" in proc.stderr
    assert newest.report.is_file() and not (runs / "20260101T000000Z-ramp" / "report.html").exists()


README = REPO_ROOT / "README.md"
HELP_COMMANDS: dict[str, list[str]] = {
    "locust": [str(VENV_BIN / "locust"), "-f", "locustfiles/ramp.py", "--embedperf-help"],
    "embedperf run": [*EMBEDPERF, "run", "--help"],
}
# Options both commands take, spelt alike (the README says so in its table of everyday commands).
SHARED_OPTIONS = (
    "--scenario", "--scenario-profile", "--set", "--label", "--runs-dir", "--host", "--no-collectors",
    "--step-duration-s", "--warmup-s", "--api-key", "--devices", "--agent", "--protocol", "--model",
)  # fmt: skip
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
COMMAND = re.compile(r"(?:^|\s)(locust|embedperf run)(?=\s|$)")


def readme_command_lines(text: str) -> list[str]:
    """Inline code spans, and the lines of fenced blocks with `\\` continuations joined and comments cut."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    lines = re.findall(r"`([^`\n]+)`", prose)
    for block in blocks:
        lines += [line.split(" #", 1)[0] for line in block.replace("\\\n", " ").splitlines()]
    return lines


def readme_options(text: str) -> dict[str, set[str]]:
    """command -> every --option the README shows on a `locust ...` or `embedperf run ...` command line."""
    found: dict[str, set[str]] = {name: set() for name in HELP_COMMANDS}
    for line in readme_command_lines(text):
        match = COMMAND.search(line)
        if match:
            found[match.group(1)] |= set(OPTION.findall(line[match.end() :]))
    return found


def help_options(command: str) -> set[str]:
    proc = run(HELP_COMMANDS[command])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(OPTION.findall(proc.stdout))


def test_readme_parser_finds_the_commands_it_checks() -> None:
    shown = readme_options(
        "| `locust -f x.py --headless --api-key KEY` | prints `run folder: PATH` |\n"
        "```bash\nEMBEDPERF_AGENT_TOKEN=t embedperf run ramp --host URL \\\n    --agent URL  # not --this\n"
        "embedperf report --lang zh\n```\n"
    )
    assert shown == {"locust": {"--headless", "--api-key"}, "embedperf run": {"--host", "--agent"}}


def test_every_option_the_readme_shows_exists_in_that_commands_help() -> None:
    shown = readme_options(README.read_text(encoding="utf-8"))
    assert {"--api-key", "--step-duration-s", "--warmup-s"} <= shown["locust"] & shown["embedperf run"]
    for command, options in shown.items():
        missing = sorted(options - help_options(command))
        assert missing == [], f"the README shows {missing} for `{command}`, which its --help does not list"


def test_the_options_both_commands_share_exist_in_both() -> None:
    for command in HELP_COMMANDS:
        missing = sorted(set(SHARED_OPTIONS) - help_options(command))
        assert missing == [], f"`{command} --help` lacks {missing}"

"""`embedperf verify --start-cmd`: start the service and watch its probes from the first second.

Readiness is only provable while the model loads, so verify starts the service and polls liveness and
readiness every startup_poll_s from the start, with one embeddings request whenever readiness says yes (what
it promises). Layer 4 judges that timeline (study.verify.ops). The process is stopped by its PID at the end.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from embedperf.errors import ConfigError, TargetError
from loadgen.processes.child import stop_child
from study.verify.target import TargetClient
from study.verify.thresholds import VerifyThresholds

STOP_GRACE_S = 20.0
LOG_TAIL_CHARS = 2000
PROBE_TEXT = "embedperf verify start-up probe"
PORT_PLACEHOLDER = "{port}"


@dataclass(frozen=True)
class Observation:
    """One poll: seconds since the process started and each endpoint's status (0: no answer; None: not asked)."""

    t_s: float
    health: int
    ready: int
    embed: int | None = None


def start_command(command: str, base_url: str) -> list[str]:
    """The command as argv, `{port}` replaced by --host's port (no shell: quoting as a POSIX shell reads it)."""
    port = urlsplit(base_url).port
    if PORT_PLACEHOLDER in command and port is None:
        raise ConfigError(f"--start-cmd uses {PORT_PLACEHOLDER} but --host {base_url} names no port")
    if not (argv := shlex.split(command.replace(PORT_PLACEHOLDER, str(port)))):
        raise ConfigError(
            "--start-cmd is empty; give the command that starts the service, e.g. 'embedperf serve --port {port}'"
        )
    return argv


@dataclass
class StartedService:
    """After `start()` the service is running and has answered embeddings once ready (`stop()` ends it);
    `timeline` holds every poll up to then."""

    command: str
    client: TargetClient
    thresholds: VerifyThresholds  # the probes' paths, startup_poll_s and startup_timeout_s
    log_path: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)
    timeline: list[Observation] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.argv = start_command(self.command, self.client.base_url)

    def start(self) -> StartedService:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            try:
                self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)
            except OSError as exc:
                raise ConfigError(f"--start-cmd {shlex.join(self.argv)!r} cannot start: {exc}") from exc
        try:
            self._watch()
        except BaseException:
            self.stop()
            raise
        return self

    def _watch(self) -> None:
        assert self.proc is not None
        t, poll_s = self.thresholds, self.thresholds.startup_poll_s
        t0 = time.monotonic()
        while True:
            t_s = time.monotonic() - t0
            if self.proc.poll() is not None:
                raise TargetError(
                    f"the service exited with {self.proc.returncode} before it was ready{self.log_tail()}"
                )
            health = self.client.get(t.health_path, timeout_s=poll_s * 5).status
            ready = self.client.get(t.ready_path, timeout_s=poll_s * 5).status
            embed = self.client.embed([PROBE_TEXT]).status if ready == 200 else None
            self.timeline.append(Observation(round(t_s, 3), health, ready, embed))
            if embed == 200:
                return
            if t_s > t.startup_timeout_s:
                raise TargetError(
                    f"the service did not become ready and answer embeddings within {t.startup_timeout_s:g} s "
                    f"(startup_timeout_s){self.log_tail()}"
                )
            time.sleep(max(0.0, poll_s - (time.monotonic() - t0 - t_s)))

    def log_tail(self) -> str:
        tail = self.log_text()[-LOG_TAIL_CHARS:]
        return f"; its output ({self.log_path}) ends:\n{tail}" if self.log_path.is_file() else ""

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.is_file() else ""

    def stop(self) -> None:
        """SIGTERM by PID, SIGKILL after STOP_GRACE_S."""
        if self.proc is not None:
            stop_child(self.proc, STOP_GRACE_S)

"""Host source (`psutil`): system CPU and memory, and CPU/RSS of the run's processes (service, generator).

The service is found by its PID or, failing that, by the process listening on its URL's port on
this host; its children (workers) are counted with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

import psutil

from collectors.base import Reading, Source
from collectors.config import CollectorConfig
from collectors.local_host import is_local_host

MB = 1024.0 * 1024.0
PID_LOOKUP_RETRY_S = 10.0


def listening_pid(port: int) -> int | None:
    """PID of the process listening on TCP `port` on this host, or None (not local / not visible)."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return None
    for conn in connections:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
            return int(conn.pid)
    return None


class ProcessGroup:
    """A process and its children, with per-process CPU counters kept between ticks."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._procs: dict[int, psutil.Process] = {}

    def sample(self) -> tuple[float | None, float] | None:
        """(CPU % of one core summed over the group or None on the first tick, RSS MB); None if gone."""
        try:
            root = psutil.Process(self.pid)
            members = [root, *root.children(recursive=True)]
        except psutil.Error:
            return None
        known = {proc.pid: self._procs.get(proc.pid, proc) for proc in members}
        new = set(known) - set(self._procs)
        self._procs = known  # the members gone are forgotten
        cpu_pct, rss_mb, root_is_new = 0.0, 0.0, False
        for pid, proc in known.items():
            try:
                with proc.oneshot():
                    pct = proc.cpu_percent(None)  # since the previous call; a new process has none
                    rss_mb += proc.memory_info().rss / MB
            except psutil.Error:
                continue
            if pid in new:
                root_is_new = root_is_new or pid == self.pid
            else:
                cpu_pct += pct
        return (None if root_is_new else cpu_pct), rss_mb


class HostSource(Source):
    name = "psutil"

    def __init__(self, config: CollectorConfig) -> None:
        super().__init__()
        self.config = config
        self.groups: dict[str, ProcessGroup] = {}
        self._service_port: int | None = None
        self._next_lookup_s = 0.0

    def start(self) -> None:
        psutil.cpu_percent(None)
        if self.config.generator_pid is not None:
            self.groups["proc:generator"] = ProcessGroup(self.config.generator_pid)
        if self.config.service_pid is not None:
            self.groups["proc:service"] = ProcessGroup(self.config.service_pid)
        elif self.config.service_url:
            parts = urlsplit(self.config.service_url)
            if parts.hostname and is_local_host(parts.hostname):
                self._service_port = parts.port or (443 if parts.scheme == "https" else 80)
            else:
                self.status.event("info", f"service {parts.hostname} is not on this host: no proc:service rows")

    def _find_service(self, ts_unix_s: float) -> None:
        if self._service_port is None or "proc:service" in self.groups or ts_unix_s < self._next_lookup_s:
            return
        if (pid := listening_pid(self._service_port)) is None:
            if self._next_lookup_s == 0.0:
                self.status.event("info", f"no process listens on port {self._service_port} yet; retrying")
            self._next_lookup_s = ts_unix_s + PID_LOOKUP_RETRY_S
            return
        self.groups["proc:service"] = ProcessGroup(pid)
        self.status.event("info", f"service PID {pid} found listening on port {self._service_port}", "proc:service")

    def sample(self, ts_unix_s: float) -> Iterable[Reading]:
        vm = psutil.virtual_memory()
        readings: list[Reading] = [
            ("cpu", "cpu_util_pct", psutil.cpu_percent(None)),
            ("cpu", "mem_used_mb", (vm.total - vm.available) / MB),
            ("cpu", "mem_total_mb", vm.total / MB),
        ]
        self._find_service(ts_unix_s)
        for device, group in list(self.groups.items()):
            if (result := group.sample()) is None:
                self.status.event("info", f"process {group.pid} exited", device)
                del self.groups[device]
                continue
            cpu_pct, rss_mb = result
            if cpu_pct is not None:
                readings.append((device, "cpu_util_pct", cpu_pct))
            readings.append((device, "rss_mb", rss_mb))
        return readings

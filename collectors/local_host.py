"""Whether a host name or address is this machine: a remote target's devices are not ours to sample."""

from __future__ import annotations

import ipaddress
import socket

import psutil


def is_local_host(host: str) -> bool:
    """True for localhost, this machine's names, a loopback address or an address of one of its interfaces."""
    if host in ("localhost", socket.gethostname(), socket.getfqdn()):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback or host in _local_addresses()
    except ValueError:
        return False


def _local_addresses() -> set[str]:
    return {a.address for addrs in psutil.net_if_addrs().values() for a in addrs}

"""Loopback ports for the servers tests start, never one twice in a test session.

A port is drawn at random below the kernel's ephemeral range, then checked free. A
port the kernel hands out (binding port 0) is no good: the same range serves every
outgoing connection's local port, and with libxmtp clients reconnecting by the
hundred on a busy machine one of them can take the port between the probe and the
server's bind (seen: a daemon's `--http` port "already in use"). Below the range only
another test's server can collide, and the draw is spread over some 17,000 ports.
"""

from __future__ import annotations

import functools
import random
import socket
from pathlib import Path

# Ports this test session has handed out. libxmtp clients of finished tests live on in
# this process and keep reconnecting to their devnet's port; a later devnet on the same
# port would take their traffic, so no port is used twice.
_USED_PORTS: set[int] = set()
_LOWEST = 15_000
_draw = random.SystemRandom()


@functools.cache
def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux's default when unknown)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def fresh_port() -> int:
    """A free loopback port outside the ephemeral range that this session has not had."""
    high = max(_ephemeral_low(), _LOWEST + 1_000)
    while True:
        port = _draw.randrange(_LOWEST, high)
        if port in _USED_PORTS:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _USED_PORTS.add(port)
        return port

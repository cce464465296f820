"""Loopback ports for devnets, never one twice in a test session."""

from __future__ import annotations

import socket

# Ports of the devnets this test session has started. libxmtp clients of finished
# tests live on in this process and keep reconnecting to their devnet's port; a later
# devnet on the same port would take their traffic, so no port is used twice.
_USED_PORTS: set[int] = set()


def fresh_port() -> int:
    """A free loopback port no earlier devnet of this session had."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port not in _USED_PORTS:
            _USED_PORTS.add(port)
            return port

"""`cone devnet`: a local, wire-compatible XMTP node for tests and demos.

It serves the XMTP identity and MLS node APIs that libxmtp 1.10 calls in V3 mode
and, on the same port over the same store, the D14N gateway and node APIs it calls
in D14N mode; it keeps state in memory or SQLite, and injects faults (dropped streams, failing
calls, latency) from Python or, through its control socket, from other processes.
See docs/devnet.md.
"""

from __future__ import annotations

from cone.devnet.control import ControlClient
from cone.devnet.faults import Faults
from cone.devnet.server import Devnet
from cone.devnet.stats import Stats
from cone.devnet.wire import MAX_PAYLOAD_BYTES

__all__ = ["MAX_PAYLOAD_BYTES", "ControlClient", "Devnet", "Faults", "Stats"]

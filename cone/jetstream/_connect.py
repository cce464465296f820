"""The connection to NATS: credentials through NATS's own mechanisms, nothing logged
that could carry them (the server list is shown redacted, errors by their type)."""

from __future__ import annotations

import logging
import ssl
from typing import Any

import nats
from nats.aio.client import Client

from cone.jetstream.options import JetStreamOptions
from cone.jetstream.state import STATE

log = logging.getLogger(__name__)

#: Seconds one attempt to reach a server may take.
CONNECT_TIMEOUT_S = 5.0


async def connect(options: JetStreamOptions) -> Client:
    """A connected client that reconnects by itself; raises when no server answers."""

    async def on_error(exc: Exception) -> None:
        # The type and text of the error only: nats-py's texts name no credentials.
        log.warning("jetstream %s: %s", options.shown, type(exc).__name__)

    async def on_disconnected() -> None:
        STATE.reachable = False
        log.warning("jetstream %s: disconnected; reconnecting", options.shown)

    async def on_reconnected() -> None:
        STATE.reachable = True
        log.info("jetstream %s: reconnected", options.shown)

    kwargs: dict[str, Any] = {}
    if options.creds is not None:
        kwargs["user_credentials"] = str(options.creds)
    if options.token:
        kwargs["token"] = options.token
    if options.ca is not None:
        kwargs["tls"] = ssl.create_default_context(cafile=str(options.ca))
    client: Client = await nats.connect(
        servers=options.servers,
        name="cone",
        connect_timeout=CONNECT_TIMEOUT_S,
        allow_reconnect=True,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,
        error_cb=on_error,
        disconnected_cb=on_disconnected,
        reconnected_cb=on_reconnected,
        **kwargs,
    )
    STATE.reachable = True
    return client


__all__ = ["connect"]

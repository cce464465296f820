"""Ask the XMTP node directly whether it answers, and whether it knows this identity.

libxmtp 1.10 reports neither clearly: against a node that is down its calls fail only
after their own retries, and against a node that has never seen this inbox (a devnet
restarted empty, the wrong network) publications fail with "Sync failed to wait for
intent" forever. So cone asks the node itself, with two cheap reads over its own
channel (no libxmtp involved):

- `IdentityApi/GetIdentityUpdates` for this inbox: a node that knows the inbox holds
  at least its creation; none means the inbox is unknown there.
- `MlsApi/FetchKeyPackages` for this installation: a node that knows the
  installation holds its key package; an empty one (or NOT_FOUND) means it does not.

Any other answer is an answer: the node is reachable. No answer within the timeout,
or UNAVAILABLE, means it is not.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import Enum
from typing import Final

import grpc
import grpc.aio

from cone.errors import one_line
from conepb.xmtp import identity_api_pb2 as identity
from conepb.xmtp import identity_api_pb2_grpc as identity_grpc
from conepb.xmtp import mls_api_pb2 as mls
from conepb.xmtp import mls_api_pb2_grpc as mls_grpc

#: The channel retries a refused connection quickly, so that a node that is back is
#: seen as back within about two seconds (grpc's default backoff grows to 120 s).
_CHANNEL_OPTIONS: Final = (
    ("grpc.initial_reconnect_backoff_ms", 500),
    ("grpc.min_reconnect_backoff_ms", 500),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.enable_retries", 0),
)

#: Codes that mean the node did not answer (as opposed to answering with a refusal).
_NO_ANSWER: Final = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


class NodeView(Enum):
    """What the node said to one probe."""

    KNOWS_IDENTITY = "reachable"
    IDENTITY_UNKNOWN = "identity_unknown"
    NO_ANSWER = "unreachable"


@dataclass(frozen=True)
class NodeAnswer:
    """One probe's result; `detail` says what was seen (for status and the log)."""

    view: NodeView
    detail: str


class NodeProbe:
    """Probes one node for one identity over a channel of its own."""

    def __init__(self, api_url: str, inbox_id: str, installation_id: str) -> None:
        target = api_url.split("://", 1)[-1].rstrip("/")
        self._channel = (
            grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(), _CHANNEL_OPTIONS)
            if api_url.startswith("https://")
            else grpc.aio.insecure_channel(target, _CHANNEL_OPTIONS)
        )
        self._identity = identity_grpc.IdentityApiStub(self._channel)
        self._mls = mls_grpc.MlsApiStub(self._channel)
        self._inbox_id = inbox_id
        self._installation = bytes.fromhex(installation_id)
        self._installation_id = installation_id

    async def ask(self, timeout: float) -> NodeAnswer:
        """Ask the node now; answers within `timeout` seconds, whatever the node does."""
        updates = self._identity.GetIdentityUpdates(
            identity.GetIdentityUpdatesRequest(
                requests=[identity.GetIdentityUpdatesRequest.Request(inbox_id=self._inbox_id)]
            ),
            timeout=timeout,
        )
        packages = self._mls.FetchKeyPackages(
            mls.FetchKeyPackagesRequest(installation_keys=[self._installation]), timeout=timeout
        )
        results = await asyncio.gather(updates, packages, return_exceptions=True)
        for result in results:
            if isinstance(result, grpc.aio.AioRpcError) and result.code() in _NO_ANSWER:
                return NodeAnswer(NodeView.NO_ANSWER, _no_answer(result, timeout))
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, grpc.aio.AioRpcError):
                raise result
        found_updates, found_package = results
        if _missing_updates(found_updates):
            return NodeAnswer(
                NodeView.IDENTITY_UNKNOWN,
                f"the node holds no identity updates for inbox {self._inbox_id}",
            )
        if _missing_package(found_package):
            return NodeAnswer(
                NodeView.IDENTITY_UNKNOWN,
                f"the node holds no key package for installation {self._installation_id}",
            )
        return NodeAnswer(NodeView.KNOWS_IDENTITY, "the node answers and knows this identity")

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()


def _no_answer(exc: grpc.aio.AioRpcError, timeout: float) -> str:
    if exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"the node did not answer within {timeout:g} s"
    return f"the node does not answer ({one_line(exc.details() or 'unavailable')})"


def _missing_updates(result: object) -> bool:
    if isinstance(result, grpc.aio.AioRpcError):
        return result.code() is grpc.StatusCode.NOT_FOUND
    assert isinstance(result, identity.GetIdentityUpdatesResponse)
    return not any(r.updates for r in result.responses)


def _missing_package(result: object) -> bool:
    if isinstance(result, grpc.aio.AioRpcError):
        return result.code() is grpc.StatusCode.NOT_FOUND
    assert isinstance(result, mls.FetchKeyPackagesResponse)
    return not any(p.key_package_tls_serialized for p in result.key_packages)

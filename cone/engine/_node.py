"""Ask the XMTP node directly whether it answers, and whether it knows this identity.

libxmtp 1.10 reports neither clearly: against a node that is down its calls fail only
after their own retries, and against a node that has never seen this inbox (a devnet
restarted empty, the wrong network) publications fail with "Sync failed to wait for
intent" forever. So cone asks the node itself, with two cheap reads over its own
channel (no libxmtp involved), the reads libxmtp itself makes on that backend:

| backend | the inbox's identity updates | the installation's key package |
| --- | --- | --- |
| V3, the node at the API URL | `IdentityApi/GetIdentityUpdates` | `MlsApi/FetchKeyPackages` |
| D14N, the node the gateway names | `ReplicationApi/QueryEnvelopes` on the identity topic | `ReplicationApi/GetNewestEnvelope` on the key-package topic |

A node that knows the inbox holds at least its creation; a node that knows the
installation holds its key package; none (or NOT_FOUND) means it does not.

On D14N libxmtp publishes through the gateway and reads from a node the gateway
names (`PayerApi/GetNodes`, then the fastest node to answer a health check; it keeps
that node). The probe does the same: it asks the gateway for its nodes at every
probe (so a gateway that stops answering is seen too), keeps the node it chose while
the gateway still names it and it answers, and chooses again otherwise.

No answer within the timeout, UNAVAILABLE, or an answer saying the API is not served
there (UNIMPLEMENTED: a D14N node asked V3 reads, or the reverse) or that this client
is refused (UNAUTHENTICATED, PERMISSION_DENIED) means the node cannot serve this
identity: unreachable. Any other answer is an answer: the node is reachable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cone.engine.roles.probe import NodeAnswer, NodeView
from cone.errors import one_line
from conepb.xmtp import identity_api_pb2 as identity
from conepb.xmtp import identity_api_pb2_grpc as identity_grpc
from conepb.xmtp import mls_api_pb2 as mls
from conepb.xmtp import mls_api_pb2_grpc as mls_grpc
from conepb.xmtpv4 import envelopes_pb2 as envelopes
from conepb.xmtpv4 import message_api_pb2 as replication
from conepb.xmtpv4 import message_api_pb2_grpc as replication_grpc
from conepb.xmtpv4 import payer_api_pb2 as payer
from conepb.xmtpv4 import payer_api_pb2_grpc as payer_grpc

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
#: Codes of an answer that says this client cannot be served there.
_REFUSED: Final = frozenset(
    {
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
    }
)

#: D14N topic kinds (one byte before the identifier): an inbox's identity updates (the
#: inbox id hex-decoded), an installation's key packages (its installation key).
_IDENTITY_TOPIC: Final = 2
_KEY_PACKAGE_TOPIC: Final = 3


class _Unanswered(Exception):
    """A call whose outcome is already the probe's answer (NO_ANSWER)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class NodeProbe:
    """Probes one network for one identity over channels of its own: the node at
    `api_url` on V3, or the node `gateway_url` names on D14N."""

    def __init__(
        self, api_url: str, inbox_id: str, installation_id: str, gateway_url: str | None = None
    ) -> None:
        self._secure = (gateway_url or api_url).startswith("https://")
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._api_url = api_url
        self._gateway_url = gateway_url
        self._inbox_id = inbox_id
        self._installation = bytes.fromhex(installation_id)
        self._installation_id = installation_id
        #: D14N: the node chosen (its id and URL), kept while it answers.
        self._node: tuple[int, str] | None = None
        #: Who is being asked now (named when the probe's time runs out).
        self._where = "the node"

    async def ask(self, timeout: float) -> NodeAnswer:
        """Ask the node now; answers within `timeout` seconds, whatever the node does."""
        self._where = "the node"
        try:
            if self._gateway_url:
                async with asyncio.timeout(timeout):
                    return await self._ask_d14n(self._gateway_url, timeout)
            return await self._ask_v3(timeout)
        except _Unanswered as unanswered:
            return NodeAnswer(NodeView.NO_ANSWER, unanswered.detail)
        except TimeoutError:
            return NodeAnswer(
                NodeView.NO_ANSWER, f"{self._where} did not answer within {timeout:g} s"
            )

    async def close(self) -> None:
        """Close the channels."""
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()

    def _channel(self, url: str) -> grpc.aio.Channel:
        target = url.split("://", 1)[-1].rstrip("/")
        if target not in self._channels:
            self._channels[target] = (
                grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(), _CHANNEL_OPTIONS)
                if self._secure
                else grpc.aio.insecure_channel(target, _CHANNEL_OPTIONS)
            )
        return self._channels[target]

    # --- V3: the node at the API URL ------------------------------------------------

    async def _ask_v3(self, timeout: float) -> NodeAnswer:
        channel = self._channel(self._api_url)
        updates = identity_grpc.IdentityApiStub(channel).GetIdentityUpdates(
            identity.GetIdentityUpdatesRequest(
                requests=[identity.GetIdentityUpdatesRequest.Request(inbox_id=self._inbox_id)]
            ),
            timeout=timeout,
        )
        packages = mls_grpc.MlsApiStub(channel).FetchKeyPackages(
            mls.FetchKeyPackagesRequest(installation_keys=[self._installation]), timeout=timeout
        )
        found_updates, found_package = await _both(updates, packages, "the node", timeout)
        return self._verdict(
            "the node",
            _missing(
                found_updates,
                lambda r: not any(u.updates for u in r.responses),
                identity.GetIdentityUpdatesResponse,
            ),
            _missing(
                found_package,
                lambda r: not any(p.key_package_tls_serialized for p in r.key_packages),
                mls.FetchKeyPackagesResponse,
            ),
        )

    # --- D14N: the node the gateway names ---------------------------------------------

    async def _ask_d14n(self, gateway_url: str, timeout: float) -> NodeAnswer:
        nodes = await self._nodes(gateway_url, timeout)
        if self._node is None or self._node not in nodes:
            self._node = await self._choose(nodes, timeout)
        node_id, url = self._node
        where = self._where = f"node {node_id} at {url}"
        stub = replication_grpc.ReplicationApiStub(self._channel(url))
        updates = stub.QueryEnvelopes(
            replication.QueryEnvelopesRequest(
                query=replication.EnvelopesQuery(
                    topics=[bytes([_IDENTITY_TOPIC]) + bytes.fromhex(self._inbox_id)],
                    last_seen=envelopes.Cursor(),
                ),
                limit=1,
            ),
            timeout=timeout,
        )
        packages = stub.GetNewestEnvelope(
            replication.GetNewestEnvelopeRequest(
                topics=[bytes([_KEY_PACKAGE_TOPIC]) + self._installation]
            ),
            timeout=timeout,
        )
        try:
            found_updates, found_package = await _both(updates, packages, where, timeout)
        except _Unanswered:
            self._node = None  # choose again at the next probe, as the gateway names them
            raise
        return self._verdict(
            where,
            _missing(
                found_updates,
                lambda r: not r.envelopes,
                replication.QueryEnvelopesResponse,
            ),
            _missing(
                found_package,
                lambda r: not any(x.HasField("originator_envelope") for x in r.results),
                replication.GetNewestEnvelopeResponse,
            ),
        )

    async def _nodes(self, gateway_url: str, timeout: float) -> list[tuple[int, str]]:
        """The nodes the gateway names, usable over this probe's TLS setting."""
        where = self._where = f"the gateway at {gateway_url}"
        try:
            answer = await payer_grpc.PayerApiStub(self._channel(gateway_url)).GetNodes(
                payer.GetNodesRequest(), timeout=timeout
            )
        except grpc.aio.AioRpcError as exc:
            raise _Unanswered(_failed(exc, where, timeout)) from exc
        scheme = "https://" if self._secure else "http://"
        nodes = sorted((i, u) for i, u in answer.nodes.items() if u.startswith(scheme))
        if not nodes:
            raise _Unanswered(
                f"{where} names no node reachable over {scheme} ({len(answer.nodes)} named)"
            )
        return nodes

    async def _choose(self, nodes: list[tuple[int, str]], timeout: float) -> tuple[int, str]:
        """The first named node to answer a health check (libxmtp's choice: the fastest)."""
        self._where = f"none of the {len(nodes)} nodes the gateway names"
        pending = {asyncio.ensure_future(self._answers(node, timeout)): node for node in nodes}
        failures: list[str] = []
        try:
            while pending:
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    node, why = pending.pop(task), task.result()
                    if why is None:
                        return node
                    failures.append(why)
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        raise _Unanswered("; ".join(failures))

    async def _answers(self, node: tuple[int, str], timeout: float) -> str | None:
        """None when the node answers a health check (any answer: libxmtp reads no
        status from it), else why not."""
        node_id, url = node
        try:
            await health_pb2_grpc.HealthStub(self._channel(url)).Check(
                health_pb2.HealthCheckRequest(), timeout=timeout
            )
        except grpc.aio.AioRpcError as exc:
            return _failed(exc, f"node {node_id} at {url}", timeout)
        return None

    def _verdict(self, where: str, no_updates: bool, no_package: bool) -> NodeAnswer:
        if no_updates:
            return NodeAnswer(
                NodeView.IDENTITY_UNKNOWN,
                f"{where} holds no identity updates for inbox {self._inbox_id}",
            )
        if no_package:
            return NodeAnswer(
                NodeView.IDENTITY_UNKNOWN,
                f"{where} holds no key package for installation {self._installation_id}",
            )
        return NodeAnswer(NodeView.KNOWS_IDENTITY, f"{where} answers and knows this identity")


async def _both(
    first: Awaitable[Any], second: Awaitable[Any], where: str, timeout: float
) -> tuple[object, object]:
    """Both calls' results (an answered error as its AioRpcError); _Unanswered when
    either had no answer or a refusal."""
    results = await asyncio.gather(first, second, return_exceptions=True)
    for result in results:
        if isinstance(result, grpc.aio.AioRpcError) and (
            result.code() in _NO_ANSWER or result.code() in _REFUSED
        ):
            raise _Unanswered(_failed(result, where, timeout))
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, grpc.aio.AioRpcError):
            raise result
    return results[0], results[1]


def _failed(exc: grpc.aio.AioRpcError, where: str, timeout: float) -> str:
    """Why a call to `where` gave no usable answer, in words."""
    code = exc.code()
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"{where} did not answer within {timeout:g} s"
    details = one_line(exc.details() or "")
    if code is grpc.StatusCode.UNIMPLEMENTED:
        return f"{where} does not serve this API ({details or 'unimplemented'}): wrong URL?"
    if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        return (
            f"{where} refuses this client ({code.name}: {details}); cone sends no "
            "authorization (docs/networks.md)"
        )
    if code is grpc.StatusCode.UNAVAILABLE:
        # grpc's own text for a refused connection names every address it tried.
        if "connection refused" in details.lower():
            details = "connection refused"
        return f"{where} does not answer ({details or 'unavailable'})"
    return f"{where} answered {code.name} ({details})"


def _missing(result: object, empty: Callable[[Any], bool], kind: type) -> bool:
    """Whether a read found nothing: NOT_FOUND, or an answer `empty` says is empty."""
    if isinstance(result, grpc.aio.AioRpcError):
        return result.code() is grpc.StatusCode.NOT_FOUND
    assert isinstance(result, kind)
    return empty(result)


__all__ = ["NodeAnswer", "NodeProbe", "NodeView"]

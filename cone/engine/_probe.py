"""Ask an XMTP node directly whether it has cut over from V3 to D14N.

libxmtp 1.10 does not surface the node's refusal for publishes and new subscriptions
(a publish fails with "Sync failed to wait for intent", a refused subscription just
closes): only a stream that was open at the cutover reports the text. So when a
publish or a subscription fails, cone asks the node itself with a publish that
carries nothing: xmtp-node-go checks the cutover before anything else and answers
UNAVAILABLE with its text; a node that still serves V3 refuses the empty request
(or accepts it) without storing anything. `cutover_ns` asks the time the node
reports for its cutover (xmtp-node-go's migration API).
"""

from __future__ import annotations

import grpc
import grpc.aio
from google.protobuf import empty_pb2

from cone.engine._errors import is_v3_cutover
from conepb.xmtp import mls_api_pb2 as mls
from conepb.xmtp import mls_api_pb2_grpc as mls_grpc
from conepb.xmtpmigration import migration_pb2_grpc as migration_grpc

PROBE_S = 10.0


def _channel(api_url: str) -> grpc.aio.Channel:
    target = api_url.split("://", 1)[-1].rstrip("/")
    if api_url.startswith("https://"):
        return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials())
    return grpc.aio.insecure_channel(target)


async def refuses_v3(api_url: str) -> bool:
    """Whether the node at `api_url` answers an empty SendGroupMessages with the V3
    cutover refusal. False when it answers otherwise or cannot be asked."""
    channel = _channel(api_url)
    try:
        await mls_grpc.MlsApiStub(channel).SendGroupMessages(
            mls.SendGroupMessagesRequest(messages=[]), timeout=PROBE_S
        )
    except grpc.aio.AioRpcError as exc:
        return exc.code() is grpc.StatusCode.UNAVAILABLE and is_v3_cutover(exc.details() or "")
    finally:
        await channel.close()
    return False


async def cutover_ns(api_url: str) -> int | None:
    """The cutover time the node at `api_url` reports (`FetchD14nCutover`, Unix ns);
    None when it reports none (node-go without `--api.enable-migration` answers
    UNIMPLEMENTED) or cannot be asked."""
    channel = _channel(api_url)
    try:
        answer = await migration_grpc.D14nMigrationApiStub(channel).FetchD14nCutover(
            empty_pb2.Empty(), timeout=PROBE_S
        )
    except grpc.aio.AioRpcError:
        return None
    finally:
        await channel.close()
    return int(answer.timestamp_ns) or None

"""Failures carry whether they are worth retrying: real statuses from a real daemon."""

from __future__ import annotations

import pytest

from cone.client import ConeClient
from cone.errors import ConeError, Internal, InvalidArgument, Unavailable
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess


async def test_a_call_over_grpcs_size_limit_is_deterministic_not_a_rate_limit(
    daemon: DaemonProcess,
) -> None:
    request = pb.SendRequest(to="0" * 64, text="x" * (65 * 1024 * 1024), key="k")
    with pytest.raises(ConeError) as err:
        await daemon.client.call("Send", request, timeout=60)
    assert type(err.value) is Internal
    assert err.value.reason == "internal" and not err.value.retryable
    assert "larger than max" in err.value.message


async def test_a_refusal_by_the_core_is_deterministic(daemon: DaemonProcess) -> None:
    with pytest.raises(InvalidArgument) as err:
        await daemon.client.receive(limit=5000)
    assert err.value.field == "limit" and not err.value.retryable


async def test_a_daemon_that_went_away_is_retryable(daemon: DaemonProcess) -> None:
    await daemon.stop()
    async with ConeClient(daemon.socket) as client:
        with pytest.raises(Unavailable) as err:
            await client.identity()
    assert err.value.reason == "daemon_unavailable" and err.value.retryable

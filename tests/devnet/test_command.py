"""`cone devnet` and `cone devnet-ctl` as processes: URL, signals, refusals, the control socket."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2

from conepb.xmtp import mls_api_pb2 as mls
from conepb.xmtpmigration import migration_pb2_grpc as migration_grpc
from support import wire
from support.devnet_process import START_S, DevnetProcess


async def _ctl(control: Path, *args: str) -> tuple[int, dict[str, object] | None, str]:
    """Run `cone devnet-ctl`; returns exit code, parsed stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cone", "devnet-ctl", "--control", str(control), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), START_S)
    assert process.returncode is not None
    return process.returncode, json.loads(out) if out.strip() else None, err.decode()


async def test_cone_devnet_prints_one_url_line_and_stops_cleanly_on_sigint(tmp_path: Path) -> None:
    control = tmp_path / "ctl.sock"
    node = await DevnetProcess.start(tmp_path, "--control", str(control))
    assert node.url.startswith("http://127.0.0.1:") and node.port > 0
    assert control.stat().st_mode & 0o777 == 0o600
    async with wire.node(node.url) as n:
        await wire.send(n, b"group")
    assert await node.stop(signal.SIGINT) == 0
    assert node.process.stdout is not None
    assert await node.process.stdout.read() == b""  # the URL was the only line
    assert "stopped" in node.stderr()
    assert not control.exists()


async def test_a_second_devnet_on_a_busy_port_or_database_refuses_to_start(tmp_path: Path) -> None:
    db = str(tmp_path / "devnet.db")
    node = await DevnetProcess.start(tmp_path, "--db", db)
    try:
        for args in (["--port", str(node.port)], ["--db", db]):
            with pytest.raises(RuntimeError, match=r"cannot (listen|open)"):
                await DevnetProcess.start(tmp_path, *args)
        # The busy port, as a person meets it: one line on stderr, exit code 8, none
        # of grpc's own text (`E1203 … add_port.cc`, advice about GRPC_VERBOSITY).
        second = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cone", "devnet", "--port", str(node.port), "--ephemeral",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(second.communicate(), START_S)
        assert second.returncode == 8 and out == b""
        assert err.decode().splitlines() == [
            f"cone devnet: cannot listen on 127.0.0.1:{node.port}: the port is in use "
            "(is another devnet running there? pick another --port, or 0 for a free one)"
        ]
    finally:
        assert await node.stop() == 0


async def test_cone_devnet_keeps_its_state_by_default_and_forgets_it_when_ephemeral(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    node = await DevnetProcess.start(tmp_path, env=env)  # --port 0: a throwaway node
    port = node.port
    assert await node.stop() == 0
    assert "state in memory" in node.stderr()
    assert not (tmp_path / "state").exists()

    db = tmp_path / "state" / "cone" / "devnet" / f"{port}.db"
    for _ in range(2):  # the second start finds what the first stored
        node = await DevnetProcess.start(tmp_path, "--port", str(port), env=env)
        assert f"state in {db}" in node.stderr()
        async with wire.node(node.url) as n:
            await wire.send(n, b"group")
            stored = await wire.query(n, b"group")
        assert await node.stop() == 0
    assert len(stored.messages) == 2
    assert db.stat().st_mode & 0o777 == 0o600

    node = await DevnetProcess.start(tmp_path, "--port", str(port), "--ephemeral", env=env)
    async with wire.node(node.url) as n:
        assert len((await wire.query(n, b"group")).messages) == 0
    assert await node.stop() == 0


async def test_faults_injected_from_another_process_reach_the_node(tmp_path: Path) -> None:
    control = tmp_path / "ctl.sock"
    node = await DevnetProcess.start(tmp_path, "--control", str(control))
    group = b"group"
    async with wire.node(node.url) as n:
        code, out, _ = await _ctl(control, "fail", "QueryGroupMessages", "--count", "2")
        assert code == 0 and out == {
            "method": "/xmtp.mls.api.v1.MlsApi/QueryGroupMessages",
            "count": 2,
            "code": "UNAVAILABLE",
        }
        for _ in range(2):
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await wire.query(n, group)
            assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
        await wire.query(n, group)  # the third call goes through

        # An hour's latency holds the call: it meets its deadline, not an answer.
        assert (await _ctl(control, "latency", "QueryGroupMessages", "3600000"))[0] == 0
        with pytest.raises(grpc.aio.AioRpcError) as held:
            await n.mls.QueryGroupMessages(mls.QueryGroupMessagesRequest(group_id=group), timeout=2)
        assert held.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        assert (await _ctl(control, "clear"))[0] == 0
        await wire.query(n, group)  # answered again

        stream = n.mls.SubscribeGroupMessages(
            mls.SubscribeGroupMessagesRequest(
                filters=[mls.SubscribeGroupMessagesRequest.Filter(group_id=group)]
            )
        )
        await stream.initial_metadata()
        assert (await _ctl(control, "drop-streams"))[1] == {"droppedStreams": 1}
        with pytest.raises(grpc.aio.AioRpcError) as dropped:
            await stream.read()
        assert dropped.value.code() is grpc.StatusCode.UNAVAILABLE

        code, stats, _ = await _ctl(control, "stats")
        assert code == 0 and stats is not None
        methods = stats["methods"]
        assert isinstance(methods, dict)
        assert methods["/xmtp.mls.api.v1.MlsApi/QueryGroupMessages"]["calls"] == 2
        code, _, err = await _ctl(control, "fail", "NoSuchMethod")
        assert code == 2 and "unknown method" in err
    assert await node.stop() == 0
    code, _, err = await _ctl(control, "stats")
    assert code == 5 and "UNAVAILABLE" in err


async def test_the_v3_cutover_refuses_publishes_and_subscriptions_and_serves_reads(
    tmp_path: Path,
) -> None:
    control = tmp_path / "ctl.sock"
    node = await DevnetProcess.start(tmp_path, "--control", str(control))
    group = b"group"
    async with wire.node(node.url) as n:
        await wire.send(n, group)
        stream = n.mls.SubscribeGroupMessages(
            mls.SubscribeGroupMessagesRequest(
                filters=[mls.SubscribeGroupMessagesRequest.Filter(group_id=group)]
            )
        )
        await stream.read()  # the stored message: the stream is open
        code, out, _ = await _ctl(control, "cutover")
        assert code == 0 and out is not None
        assert (out["v3Cutover"], out["endedStreams"]) == (True, 1)
        assert isinstance(out["cutoverNs"], int) and out["cutoverNs"] <= time.time_ns()
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await stream.read()
        assert (ended.value.code(), ended.value.details()) == (
            grpc.StatusCode.UNAVAILABLE,
            "XMTP V3 streaming is no longer available. Please upgrade your client to XMTP D14N.",
        )
        for publish in (wire.send(n, group), wire.new_inbox(n)):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await publish
            assert (refused.value.code(), refused.value.details()) == (
                grpc.StatusCode.UNAVAILABLE,
                "publishing to XMTP V3 is no longer available. "
                "Please upgrade your client to XMTP D14N.",
            )
        assert len((await wire.query(n, group)).messages) == 1  # reads keep working
        again = n.mls.SubscribeGroupMessages(
            mls.SubscribeGroupMessagesRequest(
                filters=[mls.SubscribeGroupMessagesRequest.Filter(group_id=group)]
            )
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await again.read()
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
        assert "streaming is no longer available" in (refused.value.details() or "")

        assert (await _ctl(control, "v3-cutover", "--off"))[1] == {
            "v3Cutover": False,
            "cutoverAt": "never",
            "cutoverNs": 2**63 - 1,
            "endedStreams": 0,
        }
        await wire.send(n, group)
        assert len((await wire.query(n, group)).messages) == 2
    assert await node.stop() == 0


async def _fetch_cutover(n: wire.Node) -> int:
    """The cutover time the V3 side reports (`D14nMigrationApi/FetchD14nCutover`)."""
    stub = migration_grpc.D14nMigrationApiStub(n.channel)
    return int((await stub.FetchD14nCutover(empty_pb2.Empty())).timestamp_ns)


async def test_a_cutover_set_for_later_is_reported_then_refuses_v3_from_that_time_on(
    tmp_path: Path,
) -> None:
    control = tmp_path / "ctl.sock"
    before = time.time_ns()
    node = await DevnetProcess.start(tmp_path, "--control", str(control), "--cutover-at", "+3600")
    group = b"group"
    async with wire.node(node.url) as n:
        at = await _fetch_cutover(n)
        assert before + 3600e9 <= at <= time.time_ns() + 3600e9  # an hour from the start
        await wire.send(n, group)  # before the time, V3 publishes
        stream = n.mls.SubscribeGroupMessages(
            mls.SubscribeGroupMessagesRequest(
                filters=[mls.SubscribeGroupMessagesRequest.Filter(group_id=group)]
            )
        )
        await stream.read()
        # Bring the time forward to a moment to come (far enough for the command to
        # land before it on a busy machine): the stream stays open until then.
        soon = time.time_ns() + 5_000_000_000
        code, out, _ = await _ctl(control, "cutover", "--at", str(soon))
        assert code == 0 and out is not None
        assert (out["cutoverNs"], out["endedStreams"]) == (soon, 0)
        assert await _fetch_cutover(n) == soon
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await asyncio.wait_for(stream.read(), 30)  # ended when the time arrives
        assert time.time_ns() >= soon
        assert (ended.value.code(), ended.value.details()) == (
            grpc.StatusCode.UNAVAILABLE,
            "XMTP V3 streaming is no longer available. Please upgrade your client to XMTP D14N.",
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await wire.send(n, group)
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
        assert "publishing to XMTP V3 is no longer available" in (refused.value.details() or "")
        assert len((await wire.query(n, group)).messages) == 1  # reads keep working
    assert await node.stop() == 0


async def test_without_a_cutover_the_v3_side_reports_the_largest_time_and_a_bad_time_is_refused(
    tmp_path: Path,
) -> None:
    control = tmp_path / "ctl.sock"
    node = await DevnetProcess.start(tmp_path, "--control", str(control))
    async with wire.node(node.url) as n:
        assert await _fetch_cutover(n) == 9223372036854775807
        code, _, err = await _ctl(control, "cutover", "--at", "tomorrow")
        assert code == 2 and "not a cutover time" in err
        code, out, _ = await _ctl(control, "cutover", "--at", "2030-01-01T00:00:00Z")
        assert code == 0 and out is not None and out["cutoverAt"] == "2030-01-01T00:00:00Z"
        assert await _fetch_cutover(n) == 1893456000 * 10**9
        await wire.send(n, b"group")  # still before it
    assert await node.stop() == 0

"""How libxmtp's streams end (cone/engine/streams.py, _subscriptions.py): no callback
comes after the engine has closed, and one that comes after its loop has closed does
not take the process down.

libxmtp calls a stream's callbacks on its own threads, and an exception raised there is
a panic that aborts the process. Once, in a whole-suite run, a resubscription that hung
(the node delaying it) outlived its engine: cone had given up on it without ending it,
and when the node went away libxmtp ended it into a closed loop. Real engines on real
devnets; the bad timings are forced.
"""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cone.devnet import Devnet
from cone.engine import _client, streams
from cone.engine.engine import Engine
from cone.store import xmtp_database
from support.devnet_process import DevnetProcess
from support.peers import Peer
from support.waiting import until

WAIT_S = 60.0

_SCRIPT = textwrap.dedent(
    """
    import asyncio, os, sys, threading
    from cone.engine import _client, streams
    from cone.engine.engine import Engine
    from cone.store import xmtp_database

    # Counts each stream's end as libxmtp reports it (after cone's own handling, which
    # before the fix raised here, and aborted the process).
    ended = threading.Semaphore(0)
    on_close = streams._Callback.on_close

    def counted(self):
        try:
            on_close(self)
        finally:
            ended.release()

    streams._Callback.on_close = counted

    async def opened():
        engine = await Engine.open(
            api_url=sys.argv[1], gateway_url=None, db_path=sys.argv[2] + "/xmtp.db3",
            db_key=os.urandom(32), wallet_key=_client.generate_wallet_key(), new=True,
            child=xmtp_database,
        )
        await engine.start_streams(
            on_message=lambda m: None, on_conversation=lambda c: None,
            on_consent=lambda u: None, on_restart=lambda: None,
        )
        return engine

    loop = asyncio.new_event_loop()
    engine = loop.run_until_complete(opened())
    loop.close()  # the supervisors never ran their ending: the streams stay open
    print("loop closed", flush=True)
    for _ in range(3):  # messages, requests, conversations (the consent stream is local)
        if not ended.acquire(timeout=float(sys.argv[3])):
            print("a stream did not end", flush=True)
            os._exit(2)
    print("streams ended", flush=True)
    os._exit(0)  # libxmtp's and the lane's threads are not waited for
    """
)


async def test_streams_ending_after_the_loop_closed_do_not_abort_the_process(
    tmp_path: Path,
) -> None:
    devnet = await DevnetProcess.start(tmp_path)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _SCRIPT, devnet.url, str(tmp_path), str(WAIT_S),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), WAIT_S)
        assert line == b"loop closed\n"
        await devnet.kill()  # every stream ends now, on libxmtp's threads
        out, err = await asyncio.wait_for(process.communicate(), WAIT_S + 10)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        if devnet.process.returncode is None:
            await devnet.kill()
    # (libxmtp writes its own log lines to stdout)
    said = out.decode().splitlines()[-1:]
    assert (process.returncode, said) == (0, ["streams ended"]), err.decode()[-3000:]


async def test_a_subscription_given_up_on_while_it_opens_is_ended_with_its_engine(
    devnet_node: Devnet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Any] = []
    heard: list[str] = []  # what reached a callback after the engine closed
    closed = False
    init, on_error, on_close = (
        streams._Callback.__init__,
        streams._Callback.on_error,
        streams._Callback.on_close,
    )

    def counted_init(self: Any, *args: Any) -> None:
        init(self, *args)
        made.append(self)

    def counted_error(self: Any, error: Any) -> None:
        if closed:
            heard.append(f"error: {error}")
        on_error(self, error)

    def counted_close(self: Any) -> None:
        if closed:
            heard.append("close")
        on_close(self)

    # Instrumentation: the real callbacks run.
    monkeypatch.setattr(streams._Callback, "__init__", counted_init)
    monkeypatch.setattr(streams._Callback, "on_error", counted_error)
    monkeypatch.setattr(streams._Callback, "on_close", counted_close)
    engine = await Engine.open(
        api_url=devnet_node.url,
        db_path=str(tmp_path / "xmtp.db3"),
        db_key=os.urandom(32),
        wallet_key=_client.generate_wallet_key(),
        new=True,
        child=xmtp_database,
    )
    await engine.start_streams(
        on_message=lambda m: None,
        on_conversation=lambda c: None,
        on_consent=lambda u: None,
        on_restart=lambda: None,
    )
    assert len(made) == 5
    # The node holds every new subscription back: the three network streams reopen,
    # and their subscriptions wait to be ready ("accepted" carries no conversation
    # yet: it has no subscription to drop).
    devnet_node.faults.set_latency("SubscribeGroupMessages", 3600)
    devnet_node.faults.set_latency("SubscribeWelcomeMessages", 3600)
    devnet_node.faults.drop_streams()

    async def reopening() -> bool:
        return len(made) == 8

    await until(reopening)

    async def held_at_the_node() -> bool:
        faults = devnet_node.faults
        return faults.held("SubscribeGroupMessages") + faults.held("SubscribeWelcomeMessages") >= 3

    await until(held_at_the_node)
    await engine.close()
    closed = True
    # A peer's stream, open when the node stops, tells when libxmtp has seen the end
    # of the node's streams (the held calls keep the latency they started with).
    devnet_node.faults.clear()
    witness = await (await Peer.create(devnet_node.url, tmp_path, "witness")).stream_all()
    await devnet_node.stop()  # a subscription still held would end now, and call back
    await until(witness.closed.wait)
    assert heard == []

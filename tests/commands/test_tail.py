"""`cone tail` follows incoming messages one line each: without --ack it touches no
receipt; with --ack it acknowledges what it printed for its consumer."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import signal
import subprocess
import sys
import threading

from xmtp_bindings import xmtpv3 as ffi

from cone.engine import _client
from conepb.v1 import cone_pb2 as pb
from support.cli import cone_cli
from support.daemons import DaemonProcess, short_home
from support.peers import Peer
from support.waiting import receive_n, until


class _Follower:
    """`cone ARGS` left running, its stdout on a terminal (or a pipe), read as it comes."""

    def __init__(self, args: list[str], *, tty: bool) -> None:
        self.buffer = bytearray()
        if tty:
            master, slave = pty.openpty()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cone", *args],
                stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE,
            )  # fmt: skip
            os.close(slave)
            self.fd = master
        else:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cone", *args],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            assert self.proc.stdout is not None
            self.fd = self.proc.stdout.fileno()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.buffer.extend(chunk)

    @property
    def text(self) -> str:
        return self.buffer.decode(errors="replace").replace("\r\n", "\n")

    async def shows(self, needle: str) -> str:
        async def found() -> bool:
            assert self.proc.poll() is None, self.stop_and_read_stderr()
            return needle in self.text

        await until(found)
        return self.text

    def stop_and_read_stderr(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
        _, err = self.proc.communicate(timeout=30)
        return err.decode(errors="replace")

    async def interrupt(self) -> tuple[int, str]:
        """Ctrl-C; (exit code, stderr)."""
        self.proc.send_signal(signal.SIGINT)
        loop = asyncio.get_running_loop()
        _, err = await loop.run_in_executor(None, lambda: self.proc.communicate(timeout=30))
        return self.proc.returncode, err.decode(errors="replace")


async def _talking_pair(d1: DaemonProcess, d2: DaemonProcess) -> str:
    """d2 connects to d1; d1 accepts; returns the conversation id (accepted on both)."""
    me = await d1.client.identity()
    contact = (await d2.client.call("Connect", pb.ConnectRequest(to=me.address))).contact

    async def requested() -> bool:
        held = (await d1.client.call("Requests", pb.RequestsRequest())).requests
        return any(r.conversation_id == contact.conversation_id for r in held)

    await until(requested)
    await d1.client.call("Accept", pb.AcceptRequest(conversation_id=contact.conversation_id))
    return contact.conversation_id


async def test_tail_follows_without_touching_receipts_and_acks_only_when_asked(
    devnet: str,
) -> None:
    h1, h2 = short_home(), short_home()
    async with DaemonProcess(h1, devnet) as d1, DaemonProcess(h2, devnet) as d2:
        cid = await _talking_pair(d1, d2)
        sender = (await d1.client.identity()).inbox_id

        async def send(text: str, key: str) -> None:
            await d1.client.call("Send", pb.SendRequest(to=cid, text=text, key=key))

        await send("before the tail", "k1")
        watch = _Follower(["tail", "--home", str(h2), "--consumer", "watch"], tty=True)
        acker = _Follower(
            ["tail", "--home", str(h2), "--consumer", "acker", "--ack", "--json"], tty=False
        )
        try:
            text = await watch.shows("before the tail")
            await send("after \x1b[31mred\x1b[0m it started", "k2")
            text = await watch.shows("it started")
            lines = [line for line in text.splitlines() if cid in line]
            assert len(lines) == 2, text
            assert all(sender[:8] in line for line in lines)
            assert "\x1b[" not in text  # a peer's escape codes never reach the terminal
            await acker.shows("it started")
        finally:
            code, err = await watch.interrupt()
            acked_code, _ = await acker.interrupt()
        assert code == 0 and acked_code == 0, err
        printed = [json.loads(line) for line in acker.text.splitlines()]
        assert printed[0]["text"] == "before the tail"
        assert {m["conversationId"] for m in printed} == {cid}
        # --ack acknowledged for its consumer; the plain tail touched nothing at all
        nothing = await d2.client.receive(consumer="acker", wait_ms=0)
        assert list(nothing.messages) == []
        fresh = await d2.client.receive(consumer="default", limit=10)
        assert [m.deliveries for m in fresh.messages] == [1, 1]
        status = await d2.client.call("Status", pb.StatusRequest())
        assert "watch" not in {c.consumer for c in status.consumers}


async def test_tail_prints_what_arrives_as_it_starts_and_what_an_accept_releases(
    devnet: str, alice: Peer
) -> None:
    h1, h2 = short_home(), short_home()
    async with DaemonProcess(h1, devnet) as d1, DaemonProcess(h2, devnet) as d2:
        cid = await _talking_pair(d1, d2)
        me = await d2.client.identity()

        async def send(text: str, key: str) -> None:
            await d1.client.call("Send", pb.SendRequest(to=cid, text=text, key=key))

        await send("before the tail", "k0")
        await receive_n(d2.client, 1, consumer="seen")
        # A stranger's request, held (not receivable) before the tail starts.
        dm = await alice.client.conversations().find_or_create_dm_by_identity(
            _client.identifier(me.address),
            ffi.FfiCreateDmOptions(message_disappearing_settings=None),
        )
        await alice.send(dm, "from a stranger")

        async def requested() -> str | None:
            held = (await d2.client.call("Requests", pb.RequestsRequest())).requests
            return held[0].conversation_id if held else None

        request = await until(requested)
        watch = _Follower(["tail", "--home", str(h2)], tty=True)
        try:
            # Sent the instant the tail starts, before it can have read the head.
            await send("as it starts", "k1")
            await watch.shows("as it starts")
            accepted = await cone_cli(["accept", request, "--home", str(h2)])
            assert accepted.code == 0, accepted.err
            text = await watch.shows("from a stranger")
        finally:
            code, err = await watch.interrupt()
        assert code == 0, err
        assert "before the tail" not in text
        assert len([line for line in text.splitlines() if "as it starts" in line]) == 1

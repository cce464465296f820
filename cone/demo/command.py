"""`cone demo`: a devnet, an agent under `cone bridge`, and a second identity talking to it.

Everything runs on this machine in temporary directories that are removed at the
end: the devnet in this process; the agent as a `cone bridge` subprocess running
`python -m cone.demo.echo_agent`; "you" as a second cone core hosted in this process.
"You" connect to the agent and send a few messages, then a file and a reaction; the
agent's side accepts the request through the bridge's socket (as an operator would,
with `cone serve` or any gRPC client); each reply is printed as it arrives: text, the
agent's 👍 on your file and the receipt file it sends back, its thanks for your
reaction. Exit 0 when every message got its reply, 1 otherwise (with the bridge's log
on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import IO, Final, TypeVar

from cone._command import configure_logging
from cone.client import ConeClient
from cone.config import Paths, Settings, drop_secrets
from cone.errors import ConeError, Unavailable
from conepb.v1 import cone_pb2 as pb

T = TypeVar("T")

SCRIPT: Final = (
    "Hi! Who are you?",
    "What can cone do for an agent?",
    "Thanks, that is all for now.",
)
DEADLINE_S: Final = 120.0
AGENT_COMMAND: Final = ("-m", "cone.demo.echo_agent")


class _Show:
    """Prints the conversation with the seconds since the start."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.t0 = time.monotonic()

    def line(self, who: str, text: str) -> None:
        stamp = f"[{time.monotonic() - self.t0:5.1f}s]"
        first, *rest = text.splitlines() or [""]
        print(f"{stamp} {who:<14} {first}", file=self.out, flush=True)
        for more in rest:
            print(f"{'':8} {'':<14} {more}", file=self.out, flush=True)


async def _until(probe: Callable[[], Awaitable[T | None]], what: str) -> T:
    async with asyncio.timeout(DEADLINE_S):
        while True:
            value = await probe()
            if value:
                return value
            await asyncio.sleep(0.05)
    raise TimeoutError(what)  # unreachable; the timeout raises


@contextlib.asynccontextmanager
async def _bridge(home: Path, url: str, log: IO[bytes]) -> AsyncIterator[ConeClient]:
    """`cone bridge` running the echo agent on `home`; yields a client on its socket."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONE_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cone", "bridge", "--home", str(home), "--api-url", url,
        "--reactions", "--", sys.executable, *AGENT_COMMAND,
        env=env, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log,
    )  # fmt: skip
    client = ConeClient(home / "cone.sock")
    try:

        async def answering() -> bool:
            if proc.returncode is not None:
                raise RuntimeError(f"cone bridge exited with {proc.returncode}")
            if not client.socket.exists():
                return False
            try:
                await client.identity()
            except Unavailable:
                return False
            return True

        await _until(answering, "the bridge to start")
        yield client
    finally:
        await client.close()
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(30):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def _accept_request(agent: ConeClient) -> pb.ConversationRequest:
    async def requested() -> pb.ConversationRequest | None:
        reqs = (await agent.call("Requests", pb.RequestsRequest())).requests
        return reqs[0] if reqs else None

    request = await _until(requested, "the agent to see the request")
    await agent.call("Accept", pb.AcceptRequest(conversation_id=request.conversation_id))
    return request


async def _reply(you: ConeClient, conversation_id: str) -> pb.Message:
    async with asyncio.timeout(DEADLINE_S):
        while True:
            batch = await you.receive(consumer="demo", wait_ms=10_000)
            for message in batch.messages:
                await you.ack([message.message_id], consumer="demo")
                if message.conversation_id == conversation_id:
                    return message


def _shown(m: pb.Message) -> str:
    """A received message as the demo prints it."""
    if m.HasField("reaction"):
        return f"reacts {m.reaction.emoji} to your message"
    if m.HasField("attachment"):
        a = m.attachment
        body = a.data.decode(errors="replace").strip() if a.HasField("data") else ""
        return f"sends {a.filename} ({a.mime_type}, {a.size} bytes):\n{body}"
    return str(m.text)


FILE: Final = b"cone carries files: this one travels as an XMTP attachment.\n"


async def _demo(out: IO[str], log: IO[bytes]) -> None:
    from cone.devnet import Devnet
    from cone.startup import host_core

    show = _Show(out)
    root = Path(tempfile.mkdtemp(prefix="cone-demo-"))
    try:
        async with Devnet(port=0) as url:
            print(f"cone demo: a local devnet on {url}; nothing leaves this machine.", file=out)
            you_settings = Settings(paths=Paths(root / "you"), network="local", api_url=url)
            async with (
                _bridge(root / "agent", url, log) as agent,
                host_core(you_settings, create=True) as running,
                ConeClient(running.socket) as you,
            ):
                a = await agent.identity()
                me = await you.identity()
                print(
                    f"  agent  {a.address}  under `cone bridge --reactions -- python "
                    f"{' '.join(AGENT_COMMAND)}`\n  you    {me.address}  (a second cone)\n",
                    file=out,
                    flush=True,
                )
                contact = (await you.call("Connect", pb.ConnectRequest(to=a.address))).contact
                cid = contact.conversation_id
                for i, text in enumerate(SCRIPT):
                    request = pb.SendRequest(to=cid, text=text, key=f"demo:{i}")
                    await you.call("Send", request)
                    show.line("you → agent", text)
                    if i == 0:
                        await _accept_request(agent)
                        show.line("agent", "accepts your DM (a call relayed to the bridge)")
                    reply = await _reply(you, cid)
                    show.line("agent → you", reply.text)
                # Content both ways: a file (the agent reacts and sends a file back)...
                attachment = pb.OutgoingAttachment(
                    filename="hello.txt", mime_type="text/plain", data=FILE
                )
                await you.call("Send", pb.SendRequest(to=cid, attachment=attachment, key="demo:f"))
                show.line("you → agent", f"sends hello.txt (text/plain, {len(FILE)} bytes)")
                for _ in range(2):
                    show.line("agent → you", _shown(await _reply(you, cid)))
                # ...and a reaction to the agent's last text answer.
                reaction = pb.Reaction(message_id=reply.message_id, emoji="❤️")
                await you.call("Send", pb.SendRequest(to=cid, reaction=reaction, key="demo:r"))
                show.line("you → agent", "reacts ❤️ to its answer")
                show.line("agent → you", _shown(await _reply(you, cid)))
        print(
            f"\ncone demo: {len(SCRIPT)} messages, a file and a reaction, each answered. Done.",
            file=out,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    """Run the demo; 0 when every message got its reply."""
    configure_logging(args.verbose, quiet=True)  # the demo's story, nothing else
    drop_secrets("CONE_WALLET_KEY", "CONE_DB_KEY")  # the demo makes its own identities
    import uvloop

    from cone.facades._stdio import guard_stdout

    # libxmtp logs on fd 1: keep stdout for the conversation, send the rest to stderr.
    out = os.fdopen(guard_stdout(), "w", encoding="utf-8", errors="replace")
    with out, tempfile.TemporaryFile() as log:
        try:
            uvloop.run(_demo(out, log))
        except KeyboardInterrupt:
            # Ctrl-C: the demo has cleaned up (the bridge stopped, the directories
            # removed) on its way out; one line, no traceback.
            print("cone demo: interrupted; everything it started is stopped", file=sys.stderr)
            return 130
        except (ConeError, RuntimeError, TimeoutError) as err:
            log.seek(0)
            sys.stderr.write(log.read().decode(errors="replace"))
            print(f"cone demo: failed: {err}", file=sys.stderr)
            return 1
    return 0


__all__ = ["run"]

"""What a person reads about a failure is one clean line cone writes: a failing send's
`lastError` (status, `cone status`, the console) and a stream's, derived from the
error's reason and its essential detail; libxmtp's own text (`[GroupError::…] …`,
`api client at endpoint … has error status …`) goes only to the log, at DEBUG."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cone.devnet import Devnet
from conepb.v1 import cone_pb2 as pb
from support.cli import cone_cli
from support.daemons import BACKENDS, DaemonProcess
from support.peers import Peer
from support.waiting import until

#: What libxmtp's raw error text looks like; none of it may reach what a person reads.
RAW = re.compile(r"\[\w+::\w+\]|api client at endpoint|has error status|Api Stats|::")
#: The line `cone status` prints for the refused send.
CLEAN_LINE = re.compile(
    r"\s*key w1 in [0-9a-f]+: failing \(network_unavailable\) after (?P<attempts>\d+) "
    r"attempt\(s\): publishing a message failed: the XMTP network did not confirm the "
    r"publication"
)


class VerboseDaemon(DaemonProcess):
    """A daemon logging at DEBUG (`-v`), where libxmtp's raw error text goes."""

    def args(self) -> list[str]:
        return [*super().args(), "-v"]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_failing_send_and_a_dropped_stream_read_as_clean_lines(
    home: Path, devnet_node: Devnet, alice: Peer, backend: str
) -> None:
    url = devnet_node.url
    async with VerboseDaemon(home, url, gateway_url=url if backend == "d14n" else None) as daemon:
        dm = (await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
        # The node refuses every publication into this DM: libxmtp gives up with its
        # "[GroupError::SyncFailedToWait] Group error: Sync failed to wait for intent".
        devnet_node.faults.fail_group(bytes.fromhex(dm.conversation_id), 1_000_000)
        sent = await daemon.client.call(
            "Send", pb.SendRequest(to=dm.conversation_id, text="refused", key="w1")
        )
        assert not sent.published
        (entry,) = (await daemon.status()).outbox
        assert (entry.key, entry.state, entry.last_reason) == (
            "w1",
            "failing",
            "network_unavailable",
        )
        assert (
            entry.last_error
            == "publishing a message failed: the XMTP network did not confirm the publication"
        )

        text = await cone_cli(["status", "--home", str(home)])
        (after,) = (await daemon.status()).outbox
        (line,) = [s for s in text.out.splitlines() if "key w1 in" in s]
        # The outbox tries again from 1 s on, and starting the command can take
        # longer on a busy machine: the count it prints is the one of its moment.
        said = CLEAN_LINE.fullmatch(line)
        assert said is not None, line
        assert entry.attempts <= int(said["attempts"]) <= after.attempts, (line, after.attempts)
        assert not RAW.search(text.out), text.out
        doc = (await cone_cli(["status", "--home", str(home), "--json"])).json()
        assert [o["lastError"] for o in doc["outbox"]] == [entry.last_error]

        # A stream the node ends: its last error is cone's line too.
        assert devnet_node.faults.drop_streams() > 0

        async def stream_errors() -> list[str]:
            return [s.last_error for s in (await daemon.status()).streams if s.last_error]

        for error in await until(stream_errors):
            assert error.startswith("the stream ended: "), error
            assert not RAW.search(error), error

        # The node stops: the retry's line says so, as cone's words.
        devnet_node.faults.clear()
        await devnet_node.stop()

        async def unreachable() -> str | None:
            (o,) = (await daemon.status()).outbox
            return o.last_error if "cannot be reached" in o.last_error else None

        daemon_line = await until(unreachable, timeout=60)
        assert re.fullmatch(
            r"publishing a message failed: the XMTP node cannot be reached: no connection"
            r"( \(\w+/\w+\))?",
            daemon_line,
        ), daemon_line

        # The raw text is in the log, for diagnosis.
        log = daemon.stderr()
        assert "libxmtp, publishing a message: [GroupError::SyncFailedToWait]" in log
        assert "tcp connect error" in log

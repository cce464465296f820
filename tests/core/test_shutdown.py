"""SIGTERM ends a real daemon within the bound whatever is in flight, a second
SIGTERM ends it at once, and nothing committed is lost."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path

from cone._shutdown import STOP_BOUND_ENV, STOP_BOUND_S
from cone.devnet import Devnet
from cone.errors import ConeError
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.peers import Peer
from support.waiting import until

# The bound is a guarantee, not a speed: allow a loaded machine its scheduling delays.
SLACK_S = 10.0
FORCED = 128 + signal.SIGTERM
#: The stop bound of a test that waits it out (cone/_shutdown.py's own, shortened).
SHORT_BOUND_S = 2.0


async def _stop_timed(daemon: DaemonProcess, bound_s: float = STOP_BOUND_S) -> tuple[int, float]:
    started = time.monotonic()
    code = await daemon.stop()
    elapsed = time.monotonic() - started
    assert not daemon.needed_kill, daemon.stderr()
    assert elapsed <= bound_s + SLACK_S, elapsed
    return code, elapsed


async def _send(daemon: DaemonProcess, to: str, key: str) -> pb.SendResponse:
    return await daemon.client.call("Send", pb.SendRequest(to=to, text=f"text of {key}", key=key))


async def test_sigterm_with_sends_and_receives_in_flight_exits_in_bound_and_keeps_the_committed(
    daemon: DaemonProcess, alice: Peer
) -> None:
    dm = (await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
    await alice.sync()
    alice_dm = alice.conversation(bytes.fromhex(dm.conversation_id))
    answered: dict[str, str] = {}
    acked: set[str] = set()

    async def sends() -> None:
        for i in range(1000):
            key = f"k{i}"
            answered[key] = (await _send(daemon, dm.conversation_id, key)).message_id

    async def receives() -> None:
        while True:
            got = await daemon.client.call("Receive", pb.ReceiveRequest(limit=5, wait_ms=2000))
            ids = [m.message_id for m in got.messages]
            if ids:
                await daemon.client.call("Ack", pb.AckRequest(message_ids=ids))
                acked.update(ids)

    async def peer_sends() -> None:
        for i in range(1000):
            await alice.send(alice_dm, f"from alice {i}")

    work = [asyncio.ensure_future(w()) for w in (sends, receives, peer_sends)]
    await until(lambda: _async(len(answered) >= 3 and len(acked) >= 3), timeout=120)
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGTERM)
    started = time.monotonic()
    code = await daemon.wait_exit(STOP_BOUND_S + SLACK_S)
    assert not daemon.needed_kill and time.monotonic() - started <= STOP_BOUND_S + SLACK_S
    assert code in (0, FORCED), daemon.stderr()
    for task in work:
        task.cancel()
    results = await asyncio.gather(*work, return_exceptions=True)
    assert all(isinstance(r, ConeError | asyncio.CancelledError) for r in results), results
    answered_now, acked_now = dict(answered), set(acked)

    await daemon.restart()
    # Every answered send kept its key: the same id comes back, nothing is sent again.
    for key, message_id in answered_now.items():
        again = await _send(daemon, dm.conversation_id, key)
        assert again.message_id == message_id
    # Every ack held: acked messages are never handed out again.
    got = await daemon.client.call("Receive", pb.ReceiveRequest(limit=1000, wait_ms=0))
    assert not acked_now & {m.message_id for m in got.messages}


async def test_sigterm_with_the_network_down_exits_in_bound(
    daemon: DaemonProcess, alice: Peer, devnet_node: Devnet
) -> None:
    dm = (await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
    await devnet_node.stop()
    sends = [asyncio.ensure_future(_send(daemon, dm.conversation_id, f"k{i}")) for i in range(3)]
    await asyncio.sleep(0)  # the sends are on their way: whatever state they reached
    await _stop_timed(daemon)
    await asyncio.gather(*sends, return_exceptions=True)


async def test_sigterm_while_starting_against_a_silent_network_exits_in_bound(
    daemon: DaemonProcess, devnet_node: Devnet
) -> None:
    await daemon.stop()
    # Every identity and MLS call waits far longer than the bound: the start hangs.
    for method in ("GetIdentityUpdates", "QueryWelcomeMessages", "QueryGroupMessages"):
        devnet_node.faults.set_latency(method, 600)
    daemon.proc = subprocess.Popen(daemon.command(), env=daemon.env, stderr=daemon.log)  # noqa: ASYNC220 (returns at once; DaemonProcess keeps a Popen)
    lock = daemon.home / "cone.lock"
    # The new process holds the lock: it is starting, its signal watch is in place.
    await until(lambda: _async(lock.read_text().strip() == str(daemon.proc.pid)))
    code, _ = await _stop_timed(daemon)
    assert code in (0, FORCED), daemon.stderr()
    assert daemon.stderr().count("cone daemon: inbox") == 1  # the restart never finished starting


async def test_sigterm_while_the_outbox_is_failing_exits_in_bound_and_the_send_survives(
    daemon: DaemonProcess, alice: Peer, devnet_node: Devnet
) -> None:
    dm = (await daemon.client.call("Connect", pb.ConnectRequest(to=alice.address))).contact
    devnet_node.faults.fail_group(bytes.fromhex(dm.conversation_id), 1_000_000)
    stuck = await _send(daemon, dm.conversation_id, "stuck")
    assert not stuck.published
    await _stop_timed(daemon)
    devnet_node.faults.clear()
    await daemon.restart()

    async def delivered() -> list[object]:
        return await alice.received(bytes.fromhex(dm.conversation_id))

    (got,) = await until(delivered, timeout=60)
    assert got.id.hex() == stuck.message_id


async def test_a_held_loop_thread_still_exits_at_the_bound_and_loses_nothing(
    home: Path, devnet: str, alice: Peer
) -> None:
    # The test hook holds the loop thread at the first signal, as a stuck native call
    # would; the bound (STOP_BOUND_S, 10 s) is shortened, since this test waits it out.
    env = {"CONE_TEST_HOLD_LOOP_S": "600", STOP_BOUND_ENV: str(SHORT_BOUND_S)}
    async with DaemonProcess(home, devnet, env) as daemon:
        sent = await _send(daemon, alice.address, "before the stop")
        code, _ = await _stop_timed(daemon, SHORT_BOUND_S)
        assert code == FORCED
        assert f"did not stop within {SHORT_BOUND_S:.0f} s" in daemon.stderr()
    async with DaemonProcess(home, devnet) as daemon:
        again = await _send(daemon, alice.address, "before the stop")
        assert (again.message_id, again.deduplicated) == (sent.message_id, True)


async def test_a_second_sigterm_exits_at_once(home: Path, devnet: str) -> None:
    async with DaemonProcess(home, devnet, {"CONE_TEST_HOLD_LOOP_S": "600"}) as daemon:
        assert daemon.proc is not None
        daemon.proc.send_signal(signal.SIGTERM)

        async def seen() -> bool:
            # Two signals sent before the first is handled merge into one (POSIX):
            # the second goes once the daemon has said it saw the first.
            return "SIGTERM; stopping" in daemon.stderr()

        await until(seen, timeout=30)
        code = await daemon.stop()
        assert (code, daemon.needed_kill) == (FORCED, False)
        # The second signal ended it, not the bound.
        assert "SIGTERM again; exiting now" in daemon.stderr()
        assert "did not stop within" not in daemon.stderr()


async def _async(value: bool) -> bool:
    return value

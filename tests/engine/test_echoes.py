"""The message stream's echo of the engine's own send is dropped on libxmtp's thread
(and told to the sender as the sign the node has it); every other message, a second
installation of the same inbox's included, passes. The
consent stream's echo of the engine's own record is told apart (cone/engine/_echoes.py)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from xmtp_bindings import xmtpv3 as ffi

from cone.engine import _client
from cone.engine._echoes import ConsentEchoes
from cone.engine.engine import Engine
from cone.engine.port import RawMessage, XmtpConsent
from cone.store import xmtp_database
from support.peers import WAIT_S, Peer
from support.waiting import until


async def test_the_engines_own_send_is_not_streamed_back_and_its_siblings_sends_are(
    devnet: str, alice: Peer, tmp_path: Path
) -> None:
    wallet = _client.generate_wallet_key()
    engine = await Engine.open(
        api_url=devnet,
        db_path=str(tmp_path / "cone.db3"),
        db_key=os.urandom(32),
        wallet_key=wallet,
        new=True,
        child=xmtp_database,
    )
    # A second installation of the same inbox, there before the DM is made (so the
    # DM's welcome reaches it).
    sibling = await _client.open_client(
        api_url=devnet,
        db_path=str(tmp_path / "sibling.db3"),
        db_key=os.urandom(32),
        wallet_key=wallet,
    )
    streamed: asyncio.Queue[RawMessage] = asyncio.Queue()
    try:
        assert sibling.inbox_id() == engine.inbox_id
        dm = await engine.find_or_create_dm(alice.inbox_id)
        # Opened after the DM exists: no gap while the stream takes a new conversation in.
        await engine.start_streams(
            on_message=streamed.put_nowait,
            on_conversation=lambda cid: None,
            on_consent=lambda updates: None,
            on_restart=lambda: None,
        )
        (health,) = [h for h in engine.stream_health() if h.name == "messages"]
        before = time.time_ns()
        prepared: list[str] = []
        node_has: list[str] = []
        own = await engine.send(
            dm.id,
            ffi.encode_text("from the engine"),
            prepared.append,
            lambda: node_has.append("own"),
        )
        assert prepared == [own]

        # The echo comes (the stream saw an event) and is not handed over.
        async def echoed() -> bool:
            return (health.last_event_ns or 0) >= before

        await until(echoed)
        seen: list[RawMessage] = []
        while not streamed.empty():
            seen.append(streamed.get_nowait())
        assert own not in [m.id for m in seen]
        # A prepared message published by `publish` (the outbox's retry) is the
        # engine's own too: its echo is dropped, and told as the sign the node has it.
        retried = await engine.prepare(dm.id, ffi.encode_text("retried"))
        await engine.publish(dm.id, retried, lambda: node_has.append("retried"))
        await sibling.conversations().sync_all_conversations(None)
        sibling_id = bytes(
            await sibling.conversation(bytes.fromhex(dm.id)).send_text("from the sibling")
        ).hex()
        await alice.sync()
        alices_id = bytes(
            await alice.send(alice.conversation(bytes.fromhex(dm.id)), "from alice")
        ).hex()

        # One conversation: the stream hands its messages over in order, so an echo
        # of `own` (published first) would come before the others.
        async with asyncio.timeout(WAIT_S):
            while not {sibling_id, alices_id} <= {m.id for m in seen}:
                seen.append(await streamed.get())
        assert own not in [m.id for m in seen] and retried not in [m.id for m in seen]
        assert node_has == ["own", "retried"]  # each echo told, on the loop
        (from_sibling,) = [m for m in seen if m.id == sibling_id]
        assert from_sibling.sender_inbox_id == engine.inbox_id
        assert from_sibling.conversation_id == dm.id
    finally:
        await engine.close()
        sibling.release_db_connection()


def test_a_consent_record_is_an_echo_once_and_only_with_its_own_state() -> None:
    echoes = ConsentEchoes()
    echoes.add("aa", XmtpConsent.ALLOWED)
    echoes.add("bb", XmtpConsent.DENIED)
    assert not echoes.take("aa", XmtpConsent.DENIED)  # another change of the same conversation
    assert not echoes.take("cc", XmtpConsent.ALLOWED)
    assert echoes.take("aa", XmtpConsent.ALLOWED)
    assert not echoes.take("aa", XmtpConsent.ALLOWED)  # a second one is news
    echoes.discard("bb", XmtpConsent.DENIED)  # libxmtp did not record it
    assert not echoes.take("bb", XmtpConsent.DENIED)
    for i in range(ConsentEchoes.LIMIT + 1):  # bounded: the oldest is forgotten
        echoes.add(f"{i:04x}", XmtpConsent.ALLOWED)
    assert not echoes.take("0000", XmtpConsent.ALLOWED)
    assert echoes.take("0001", XmtpConsent.ALLOWED)

"""Messages come on two streams split by XMTP consent (cone/engine/_subscriptions.py):
a burst of new conversations from strangers does not hold back an accepted
conversation's messages, and a conversation whose consent changes moves to the other
stream without losing a message. Real engines and peers on the devnet; the slow
resubscription that a big store pays is forced with the node's latency.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from xmtp_bindings import xmtpv3 as ffi

from cone.devnet import Devnet
from cone.engine import _client, _subscriptions
from cone.engine.engine import Engine
from cone.engine.port import RawMessage, StreamHealth, XmtpConsent
from support.peers import WAIT_S, Peer, plain_group_options
from support.waiting import until

#: How long the node holds back each new message subscription once the streams run.
HELD_S = 3.0
#: New conversations a stranger opens with the engine at once.
BURST = 3
#: The node's method that libxmtp subscribes to conversations' messages with, by API.
SUBSCRIBE = {
    "v3": "SubscribeGroupMessages",
    "d14n": "/xmtp.xmtpv4.message_api.ReplicationApi/SubscribeEnvelopes",
}


@pytest.fixture(params=["v3", "d14n"])
def api(request: pytest.FixtureRequest) -> str:
    """The XMTP API libxmtp speaks to the devnet, the engine and its peers alike."""
    name: str = request.param
    return name


class Heard:
    """What the engine's streams hand over."""

    def __init__(self) -> None:
        self.messages: list[RawMessage] = []
        self.conversations: set[str] = set()
        self.consent: set[str] = set()  # conversations with a consent update

    async def start(self, engine: Engine) -> None:
        await engine.start_streams(
            on_message=self.messages.append,
            on_conversation=self.conversations.add,
            on_consent=lambda updates: self.consent.update(
                u.conversation_id for u in updates if u.conversation_id
            ),
            on_restart=lambda: None,
        )

    def has(self, message_id: bytes) -> bool:
        return message_id.hex() in {m.id for m in self.messages}


def _health(engine: Engine, name: str) -> StreamHealth:
    (health,) = [h for h in engine.stream_health() if h.name == name]
    return health


async def test_a_burst_of_requests_does_not_hold_back_an_accepted_conversation(
    devnet_node: Devnet, engine: Engine, api: str, tmp_path: Path
) -> None:
    d14n = api == "d14n"
    alice = await Peer.create(devnet_node.url, tmp_path, "alice", d14n=d14n)
    stranger = await Peer.create(devnet_node.url, tmp_path, "stranger", d14n=d14n)
    dm = await engine.find_or_create_dm(alice.inbox_id)
    await engine.set_consent(conversation_id=dm.id, allowed=True, peer_inbox_id=alice.inbox_id)
    await alice.sync()
    heard = Heard()
    await heard.start(engine)
    subscribed = devnet_node.faults.resolve(SUBSCRIBE[api])
    before = devnet_node.stats.streams.get(subscribed, 0)
    # From now on each new message subscription waits HELD_S at the node, as one with
    # every topic of a big store does: libxmtp takes new conversations in one at a
    # time, each by subscribing again, and reads nothing meanwhile.
    devnet_node.faults.set_latency(subscribed, HELD_S)
    me = _client.identifier(engine.address)
    made = [
        bytes(
            (
                await stranger.client.conversations().create_group_by_identity(
                    [me], plain_group_options()
                )
            ).id()
        ).hex()
        for _ in range(BURST)
    ]

    async def welcomed() -> bool:
        return set(made) <= heard.conversations

    await until(welcomed)

    async def taking_them_in() -> bool:  # a fresh subscription for them waits at the node
        return devnet_node.faults.held(subscribed) > 0

    await until(taking_them_in)
    sent = await alice.send(alice.conversation(bytes.fromhex(dm.id)), "while strangers knock")

    async def delivered() -> bool:
        return heard.has(sent)

    await until(delivered)
    # It came while the requests were still being taken in (one stream for everything
    # would have had BURST subscriptions to finish first, each HELD_S).
    assert devnet_node.stats.streams.get(subscribed, 0) < before + BURST
    # The requests' own first messages still come, once their stream has taken them in.
    firsts = [await stranger.send(stranger.conversation(bytes.fromhex(g)), "hi") for g in made]

    async def all_in() -> bool:
        return all(heard.has(m) for m in firsts)

    await until(all_in, timeout=WAIT_S + BURST * HELD_S)
    assert [_health(engine, n).restarts for n in ("messages", "requests")] == [0, 0]


async def _request_from(stranger: Peer, engine: Engine) -> tuple[Any, str]:
    """A DM from `stranger` to the engine: a request (its consent unknown)."""
    dm = await stranger.client.conversations().find_or_create_dm_by_identity(
        _client.identifier(engine.address),
        ffi.FfiCreateDmOptions(message_disappearing_settings=None),
    )
    return dm, bytes(dm.id()).hex()


async def test_a_conversation_accepted_moves_to_a_stream_of_its_own_losing_nothing(
    devnet_node: Devnet, engine: Engine, api: str, tmp_path: Path
) -> None:
    stranger = await Peer.create(devnet_node.url, tmp_path, "stranger", d14n=api == "d14n")
    heard = Heard()
    await heard.start(engine)
    dm, conversation_id = await _request_from(stranger, engine)
    first = await stranger.send(dm, "one")

    async def came(message_id: bytes) -> bool:
        return heard.has(message_id)

    await until(lambda: came(first))
    requests, messages = _health(engine, "requests"), _health(engine, "messages")
    accepted = _health(engine, "accepted")
    assert messages.last_event_ns is None  # a request: on the requests stream alone
    subscribed = devnet_node.faults.resolve(SUBSCRIBE[api])
    before = devnet_node.stats.streams.get(subscribed, 0)

    await engine.set_consent(
        conversation_id=conversation_id, allowed=True, peer_inbox_id=stranger.inbox_id
    )

    async def renewed() -> bool:  # "requests" without it, "accepted" with it
        return devnet_node.stats.streams.get(subscribed, 0) >= before + 2

    await until(renewed)
    sent_at = time.time_ns()
    second = await stranger.send(dm, "two")
    await until(lambda: came(second))

    async def on_its_own() -> bool:  # the old "requests" may hand it over too, meanwhile
        return (accepted.last_event_ns or 0) >= sent_at

    await until(on_its_own)
    assert messages.last_event_ns is None  # "messages" did not subscribe again for it
    assert {m.id for m in heard.messages} == {first.hex(), second.hex()}
    # A renewal is no restart: no backoff, no error, and all stayed connected.
    assert [requests.restarts, accepted.restarts, messages.restarts] == [0, 0, 0]
    assert requests.connected and accepted.connected and messages.connected


async def test_past_the_limit_the_message_stream_takes_the_accepted_conversations(
    devnet_node: Devnet,
    engine: Engine,
    api: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_subscriptions, "RECENT_LIMIT", 1)
    monkeypatch.setattr(_subscriptions, "REGROUP_S", 0.2)
    changes: list[tuple[str, XmtpConsent]] = []
    changed = _subscriptions.Regrouping.changed

    def counted(self: _subscriptions.Regrouping, cid: str, consent: XmtpConsent) -> None:
        changes.append((cid, consent))
        changed(self, cid, consent)

    # Instrumentation: the real renewals run.
    monkeypatch.setattr(_subscriptions.Regrouping, "changed", counted)
    d14n = api == "d14n"
    strangers = [
        await Peer.create(devnet_node.url, tmp_path, f"stranger{i}", d14n=d14n) for i in range(2)
    ]
    heard = Heard()
    await heard.start(engine)
    dms = [await _request_from(s, engine) for s in strangers]
    firsts = [await s.send(dm, "hello") for s, (dm, _) in zip(strangers, dms, strict=True)]

    async def all_came() -> bool:
        return all(heard.has(m) for m in firsts)

    await until(all_came)
    messages, accepted = _health(engine, "messages"), _health(engine, "accepted")
    subscribed = devnet_node.faults.resolve(SUBSCRIBE[api])

    def count() -> int:
        return devnet_node.stats.streams.get(subscribed, 0)

    async def accept(i: int) -> None:
        before = count()
        cid = dms[i][1]
        await engine.set_consent(
            conversation_id=cid, allowed=True, peer_inbox_id=strangers[i].inbox_id
        )

        async def renewed() -> bool:
            return count() >= before + 2

        await until(renewed)

        async def echoed() -> bool:  # the consent stream hands the change back
            return cid in heard.consent

        await until(echoed)

    await accept(0)  # "requests" without it, "accepted" with it
    assert list(engine._regrouping.recent) == [dms[0][1]]
    await accept(1)  # past the limit: "messages" and "requests" ("accepted" is empty)
    # The consent stream's echo of each change moved nothing again.
    assert changes == [(cid, XmtpConsent.ALLOWED) for _, cid in dms]
    assert list(engine._regrouping.recent) == []
    sent_at = time.time_ns()
    seconds = [await s.send(dm, "again") for s, (dm, _) in zip(strangers, dms, strict=True)]

    async def seconds_came() -> bool:
        return all(heard.has(m) for m in seconds)

    await until(seconds_came)

    async def on_messages() -> bool:
        return (messages.last_event_ns or 0) >= sent_at

    await until(on_messages)  # both on "messages" now, and no longer on "accepted"
    assert (accepted.last_event_ns or 0) < sent_at
    assert [_health(engine, n).restarts for n in ("messages", "requests", "accepted")] == [
        0,
        0,
        0,
    ]


async def test_a_renewal_holds_nothing_back_while_the_node_is_slow_to_subscribe(
    devnet_node: Devnet, engine: Engine, api: str, tmp_path: Path
) -> None:
    d14n = api == "d14n"
    knocking = await Peer.create(devnet_node.url, tmp_path, "knocking", d14n=d14n)
    welcome = await Peer.create(devnet_node.url, tmp_path, "welcome", d14n=d14n)
    heard = Heard()
    await heard.start(engine)
    waiting, _ = await _request_from(knocking, engine)
    _, to_accept = await _request_from(welcome, engine)
    first = await knocking.send(waiting, "first")

    async def came(message_id: bytes) -> bool:
        return heard.has(message_id)

    await until(lambda: came(first))
    subscribed = devnet_node.faults.resolve(SUBSCRIBE[api])
    before = devnet_node.stats.streams.get(subscribed, 0)
    # Every fresh subscription now waits HELD_S at the node, as a slow or distant
    # node's may.
    devnet_node.faults.set_latency(subscribed, HELD_S)
    await engine.set_consent(
        conversation_id=to_accept, allowed=True, peer_inbox_id=welcome.inbox_id
    )

    async def renewing() -> bool:  # the renewal has begun: a fresh subscription waits
        return devnet_node.faults.held(subscribed) > 0

    await until(renewing)
    second = await knocking.send(waiting, "second")
    await until(lambda: came(second))
    # The old subscription carried it while the fresh one was held back at the node.
    assert devnet_node.stats.streams.get(subscribed, 0) < before + 2
    devnet_node.faults.clear()

    async def renewed() -> bool:
        return devnet_node.stats.streams.get(subscribed, 0) >= before + 2

    await until(renewed, timeout=WAIT_S + HELD_S)
    assert [_health(engine, n).restarts for n in ("messages", "requests", "accepted")] == [0, 0, 0]


@pytest.mark.parametrize("kind", ["dm", "group"])
async def test_a_conversation_this_engine_makes_comes_on_one_stream_from_its_start(
    devnet_node: Devnet,
    engine: Engine,
    api: str,
    kind: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """libxmtp's "messages" takes in a conversation this installation makes (allowed
    from the start), so a subscription of its own on "accepted" would hand over each
    of its messages a second time. The engine knows what it made: "accepted" never
    takes it, not even until "messages" hands over its first message. (With renewals
    this far apart, the code before handed over each message twice.)"""
    monkeypatch.setattr(_subscriptions, "REGROUP_S", 60.0)
    alice = await Peer.create(devnet_node.url, tmp_path, "alice", d14n=api == "d14n")
    heard = Heard()
    await heard.start(engine)
    if kind == "dm":
        made = (await engine.find_or_create_dm(alice.inbox_id)).id
    else:
        made = await engine.groups.create_local(
            name="made here", description=None, image_url=None, app_data=""
        )
        await engine.groups.add_members(made, [alice.inbox_id])
    # What cone's core does next with a conversation it made: accept it.
    peer = alice.inbox_id if kind == "dm" else None
    await engine.set_consent(conversation_id=made, allowed=True, peer_inbox_id=peer)
    assert made in engine._regrouping.carried and not engine._regrouping.recent
    await alice.sync()
    theirs = alice.conversation(bytes.fromhex(made))
    sent = [await alice.send(theirs, f"text {i}") for i in range(3)]

    async def all_came() -> bool:
        return all(heard.has(m) for m in sent)

    await until(all_came)
    # One more, once those are in: a second copy of theirs would be on its way by then.
    last = await alice.send(theirs, "the last")

    async def last_came() -> bool:
        return heard.has(last)

    await until(last_came)
    ids = [m.id for m in heard.messages]
    assert [ids.count(m.hex()) for m in sent] == [1, 1, 1]
    assert _health(engine, "accepted").last_event_ns is None
    assert [_health(engine, n).restarts for n in ("messages", "requests", "accepted")] == [0, 0, 0]

    # Accepting it changed no record, so no echo of it is awaited: a later change
    # from elsewhere (another installation's, by device sync) still moves it.
    for state in (ffi.FfiConsentState.DENIED, ffi.FfiConsentState.ALLOWED):
        await engine._client.set_consent_states(
            [
                ffi.FfiConsent(
                    entity_type=ffi.FfiConsentEntityType.CONVERSATION_ID, state=state, entity=made
                )
            ]
        )

    async def moved() -> bool:
        return made in engine._regrouping.recent

    await until(moved)

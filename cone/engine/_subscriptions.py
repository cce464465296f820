"""The five streams cone keeps open: messages, requests, accepted, conversations
and consent.

Each is a `SupervisedStream` (cone/engine/streams.py) whose opener subscribes
through the engine's offloaded calls and waits until libxmtp says it is ready.

Messages come on two streams, split by the conversation's consent in XMTP: allowed
conversations on "messages", the rest (requests, whose consent is still unknown) on
"requests". libxmtp's message stream takes in a new conversation by subscribing
again with the topic of every conversation it carries, one new conversation at a
time, and reads nothing meanwhile; a burst of new conversations from strangers
would hold back every accepted conversation's messages behind thousands of topics.
Split, such a burst only renews "requests", whose topics are the requests alone,
and "messages" never sees it (libxmtp drops a new conversation whose consent its
filter excludes before subscribing again). Denied conversations are on neither
(libxmtp's unfiltered stream, which cone kept before, left them out too when it
subscribed): what they send comes in by sync.

libxmtp chooses a stream's conversations when it subscribes, and not again, so a
conversation whose consent changes stays where it was until `Regrouping` renews the
streams. Subscribing "messages" again costs seconds in a big store (libxmtp reads
every conversation's cursor and the messages above it; 1.6–2.4 s at 10,000
conversations, during which libxmtp hands over no message), so a
conversation allowed meanwhile gets a subscription of its own on "accepted", and
"messages" subscribes again only once `RECENT_LIMIT` of them have gathered there.

libxmtp's message stream also takes in every conversation that is new to it while
its filter admits it: one this installation makes (libxmtp records it allowed before
it tells its streams) is on "messages" from the start. On both, each of its messages
would come twice, each time processed by libxmtp and converted, and the echo of each
own send passed to ingest (its second copy). So a conversation the engine makes is
carried by "messages" from the call that made it (`Regrouping.creating`), and never
joins "accepted"; and one that "messages" hands a message of is carried there too
(made by another installation of this inbox, say), and leaves "accepted".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, Final, Protocol

from xmtp_bindings import xmtpv3 as ffi

from cone.engine import _convert
from cone.engine._calls import NETWORK_CALL_S, Calls
from cone.engine._echoes import Echoes
from cone.engine.streams import Opener, StreamHandle, SupervisedStream
from cone.engine.values import ConsentUpdate, RawMessage, XmtpConsent

log = logging.getLogger(__name__)

#: How long ending a stream waits for libxmtp's task to stop (it is aborted: prompt).
ENDING_S: Final = 5.0

#: The message streams, each with the XMTP consent of the conversations it carries.
BY_CONSENT: Final = {
    "messages": [ffi.FfiConsentState.ALLOWED],
    "requests": [ffi.FfiConsentState.UNKNOWN],
}

#: The least time between two renewals of the message streams after consent changes.
REGROUP_S: Final = 5.0

#: At most this many conversations on "accepted", each a subscription of its own;
#: one more, and "messages" subscribes again to take them all.
RECENT_LIMIT: Final = 32


def supervised_streams(
    client: Callable[[], Any],
    x: Calls,
    *,
    regrouping: Regrouping,
    on_message: Callable[[RawMessage], None],
    on_conversation: Callable[[str], None],
    on_consent: Callable[[list[ConsentUpdate]], None],
    on_restart: Callable[[], None],
    on_error: Callable[[str], None],
    echoes: Echoes,
) -> list[SupervisedStream]:
    """The message, conversation and consent streams, not yet started; `client`
    gives libxmtp's current client at each (re)subscription (it changes at the
    cutover), `regrouping` the conversations "accepted" carries at each and hears
    which "messages" carries, `on_error` hears each stream's ending error. A message
    in `echoes` (this engine's own send) is dropped on libxmtp's thread, never
    converted. Called on the event loop the handlers run on."""
    loop = asyncio.get_running_loop()

    def message(m: Any, conversation_id: str | None = None) -> RawMessage | None:
        if echoes.take(m.sender_inbox_id, m.id):
            return None
        return _convert.raw(m, conversation_id or bytes(m.conversation_id).hex())

    def on_messages(m: Any) -> RawMessage | None:
        # On libxmtp's thread: a look-up here, the change on the loop (once, mostly).
        conversation_id = bytes(m.conversation_id).hex()
        if conversation_id not in regrouping.carried:
            try:
                loop.call_soon_threadsafe(regrouping.carried_by_messages, conversation_id)
            except RuntimeError:  # the loop is closed: nobody to tell, nothing to move
                pass
        return message(m, conversation_id)

    def conversation(c: Any) -> str:
        return bytes(c.id()).hex()

    async def ready(subscribing: Awaitable[Any]) -> Any:
        closer = await subscribing
        try:
            await closer.wait_for_ready()
        except BaseException:
            # Given up on (out of time, or stopping): a subscription nobody holds
            # would live on, and call back after its loop has closed.
            closer.end()
            raise
        if closer.is_closed():
            # libxmtp reports "ready" also for a subscription that failed.
            raise ConnectionError(
                "the subscription failed: the node refused it or cannot be reached"
            )
        return closer

    async def each_ready(cb: Any) -> list[Any]:
        # One subscription per conversation; one that fails takes the others down.
        closers: list[Any] = []
        try:
            for cid in list(regrouping.recent):
                try:
                    conv = client().conversation(bytes.fromhex(cid))
                except ffi.FfiError:
                    continue  # not in libxmtp's database: nothing to stream yet
                closers.append(await ready(conv.stream(cb)))
        except BaseException:
            for closer in closers:
                closer.end()
            raise
        return closers

    async def end_each(closers: list[Any]) -> None:
        for closer in closers:
            await closer.end_and_wait()

    def opener(name: str, open_: Callable[[Any, Any], Awaitable[Any]]) -> Opener:
        async def opened(cb: Any) -> StreamHandle:
            closer: Any = await x.call(
                lambda: ready(open_(client().conversations(), cb)),
                NETWORK_CALL_S,
                f"opening {name}",
            )
            # Waits for libxmtp's task to end: none of its callbacks can come later.
            return StreamHandle(lambda: x.call(closer.end_and_wait, ENDING_S, f"ending {name}"))

        return opened

    async def accepted(cb: Any) -> StreamHandle:
        closers = await x.call(lambda: each_ready(cb), NETWORK_CALL_S, "opening accepted streams")
        return StreamHandle(
            lambda: x.call(lambda: end_each(closers), ENDING_S, "ending accepted streams")
        )

    def supervised(
        name: str,
        label: str,
        open_: Callable[[Any, Any], Awaitable[Any]],
        convert: Callable[[Any], Any],
        on_item: Callable[[Any], None],
    ) -> SupervisedStream:
        return SupervisedStream(
            name, opener(f"the {label} stream", open_), convert, on_item, on_restart, on_error
        )

    def messages(states: list[Any]) -> Callable[[Any, Any], Awaitable[Any]]:
        return lambda c, cb: c.stream_all_messages(cb, states)

    return [
        *(
            supervised(
                name,
                name.removesuffix("s"),
                messages(states),
                on_messages if name == "messages" else message,
                on_message,
            )
            for name, states in BY_CONSENT.items()
        ),
        SupervisedStream("accepted", accepted, message, on_message, on_restart, on_error),
        supervised(
            "conversations",
            "conversation",
            lambda c, cb: c.stream(cb),
            conversation,
            on_conversation,
        ),
        supervised(
            "consent",
            "consent",
            lambda c, cb: c.stream_consent(cb),
            _convert.consent_updates,
            on_consent,
        ),
    ]


class _Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """What a renewal's timing reads: the running loop, or a test's own clock."""

    def time(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], object], /) -> _Timer: ...


class Regrouping:
    """Moves conversations between the message streams after their consent changed,
    at most once per `interval_s` (libxmtp reads a stream's conversations only when
    it subscribes). A conversation allowed joins `recent`, which "accepted" carries
    one subscription each, unless "messages" carries it already (`carried`); each
    renewal after a consent change renews "requests" (few topics: the requests
    alone), which drops it, and "accepted" if `recent` changed. "messages" is
    renewed, and `recent` emptied, only once `recent` holds more than `limit`. Until
    a renewal, a conversation stays on the stream it was on, which carries its
    messages still."""

    def __init__(
        self,
        streams: Callable[[], Iterable[SupervisedStream]],
        interval_s: float | None = None,
        limit: int | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._streams = streams
        self._clock = clock  # None: the running loop
        # None: the module's setting, read at each use.
        self._interval_s = interval_s
        self._limit = limit
        self._last: float | None = None
        self._timer: _Timer | None = None
        #: Conversations allowed since "messages" last subscribed again, oldest first.
        self.recent: dict[str, None] = {}
        #: Conversations this engine made, or "messages" handed a message of while
        #: allowed, since it last subscribed again: it carries them, and so does any
        #: fresh subscription of it while they stay allowed (read on libxmtp's thread
        #: too; changed on the loop).
        self.carried: set[str] = set()
        #: Conversations whose consent last changed to other than allowed: a fresh
        #: subscription of "messages" leaves them out, so none counts as carried.
        self._not_allowed: set[str] = set()
        self._carried_by_accepted: list[str] = []  # `recent` when "accepted" last subscribed
        self._requests_due = False  # a consent change since "requests" last subscribed
        self._creating = 0  # calls in flight that may make a conversation (`creating`)
        self._held: list[tuple[str, XmtpConsent]] = []  # changes told meanwhile, in order

    @contextlib.contextmanager
    def creating(self) -> Iterator[Callable[[str], None]]:
        """Around a call that may make a conversation here; it yields `made`, to be
        told the conversation the call made (not one it found). libxmtp tells the
        consent stream that conversation is allowed during the call, before cone
        learns its id: consent changes wait until the call is over, and then the one
        it made is carried by "messages" and joins no other stream."""
        self._creating += 1
        try:
            yield self._made
        finally:
            self._creating -= 1
            if not self._creating:
                held, self._held = self._held, []
                for conversation_id, consent in held:
                    self.changed(conversation_id, consent)

    def _made(self, conversation_id: str) -> None:
        self._not_allowed.discard(conversation_id)
        self.carried.add(conversation_id)
        self.recent.pop(conversation_id, None)

    def changed(self, conversation_id: str, consent: XmtpConsent) -> None:
        """A conversation's consent changed: renew soon, now or when `interval_s`
        has passed since the last renewal."""
        if self._creating:
            self._held.append((conversation_id, consent))
            return
        if consent is XmtpConsent.ALLOWED:
            self._not_allowed.discard(conversation_id)
            if conversation_id in self.carried:
                # On "messages" already, and on "requests" never (it was allowed when
                # "messages" took it in): nothing to renew for it.
                return
            self.recent[conversation_id] = None
        else:
            self._not_allowed.add(conversation_id)
            self.carried.discard(conversation_id)
            self.recent.pop(conversation_id, None)
        self._requests_due = True
        self._soon()

    def carried_by_messages(self, conversation_id: str) -> None:
        """Told that "messages" handed over a message of this conversation: it carries
        it (libxmtp took it in as new while allowed), so "accepted" lets it go, soon.
        Not while its consent is other than allowed: a fresh subscription of
        "messages" would leave it out."""
        if conversation_id in self._not_allowed:
            return
        self.carried.add(conversation_id)
        if self.recent.pop(conversation_id, False) is None:
            self._soon()

    def _soon(self) -> None:
        if self._timer is not None:
            return  # the renewal already waiting covers this change too
        clock = self._clock or asyncio.get_running_loop()
        interval = REGROUP_S if self._interval_s is None else self._interval_s
        wait = 0.0 if self._last is None else max(0.0, self._last + interval - clock.time())
        self._timer = clock.call_later(wait, self._renew)

    def _renew(self) -> None:
        self._timer = None
        self._last = (self._clock or asyncio.get_running_loop()).time()
        renewing = {"accepted"}
        if self._requests_due:
            renewing.add("requests")
            self._requests_due = False
        if len(self.recent) > (RECENT_LIMIT if self._limit is None else self._limit):
            # "messages" takes them all. Meanwhile they are on no stream (and while
            # it subscribes libxmtp hands over nothing anyway): its fresh
            # subscription reads each from its cursor once it is ready.
            renewing.add("messages")
            self.recent.clear()
            self.carried.clear()  # what it carries now is every allowed conversation
        if list(self.recent) == self._carried_by_accepted:
            renewing.discard("accepted")  # a change of a conversation it does not carry
        self._carried_by_accepted = list(self.recent)
        if not renewing:
            return
        log.debug("renewing the streams %s", ", ".join(sorted(renewing)))
        for s in self._streams():
            if s.name in renewing:
                s.renew()

    def cancel(self) -> None:
        """Drop a renewal still waiting (the streams are stopping)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


__all__ = ["BY_CONSENT", "RECENT_LIMIT", "REGROUP_S", "Regrouping", "supervised_streams"]

"""An in-memory engine for unit tests of the core's logic (routing, consent, the outbox).

`FakeEngine` is the engine's role fakes (cone/engine/roles/) composed over one
in-memory XMTP (`MemoryXmtp`: which addresses and inboxes exist, libxmtp's
conversations with their messages, XMTP's consent records), so it is the whole
`EnginePort`, type-checked as such. It makes no network call and imports no
xmtp-bindings. Tests steer it directly: `peer` puts an identity on the network,
`incoming` stores a peer's text message, `online = False` takes the network down,
`fail_publish`/`fail_prepare` queue errors, and `crash_after_prepare` makes the next
publish die as a process would; `send` is those two steps (`InTwoSteps`). Its
publishing stores the message in the conversation (as libxmtp does), which
`MemoryPublishing` alone does not.

Only the core's logic is under test with it: libxmtp's own behaviour is covered by
the end-to-end tests on the devnet.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from cone.core import content
from cone.engine.port import EnginePort, RawMessage
from cone.engine.roles.attachments import MemoryFetching
from cone.engine.roles.consent import MemoryConsents
from cone.engine.roles.database import MemoryDatabase
from cone.engine.roles.directory import MemoryDirectory
from cone.engine.roles.groups import MemoryGroups, MemoryInstallations
from cone.engine.roles.memory import conversation_id, hex_id
from cone.engine.roles.probe import MemoryNode, Probe
from cone.engine.roles.publishing import InTwoSteps
from cone.engine.roles.reads import MemoryReads
from cone.engine.roles.streams import MemoryStreams
from cone.engine.roles.sync import MemorySync
from cone.errors import ConeError, Unavailable


class Crash(Exception):
    """The process dying mid-call: nothing after it is recorded (not a ConeError)."""


def _nothing() -> None:
    pass


class FakeEngine(
    MemoryReads, MemorySync, MemoryDirectory, MemoryConsents, MemoryStreams, InTwoSteps
):
    """An in-memory `EnginePort`."""

    def __init__(self, name: str = "me") -> None:
        super().__init__(name)
        self.api_url = "http://fake.invalid"
        self.backend = "v3"
        self.gateway_url: str | None = None
        self.groups = MemoryGroups(self)
        self.installations = MemoryInstallations(self.installation_id)
        self.node = MemoryNode()
        self.files = MemoryFetching()
        self.database = MemoryDatabase()
        # Publishing: steering and observation.
        self.fail_prepare: list[ConeError] = []
        self.fail_publish: list[ConeError] = []
        self.crash_after_prepare = False
        self.prepared: list[str] = []
        self.published: list[str] = []

    def incoming(self, conversation_id: str, sender: str, text: str) -> RawMessage:
        """A peer's text message stored in a conversation."""
        _, payload = content.encode(text=text)
        return self.store(conversation_id, sender, payload)

    # --- publishing: the message stored in its conversation, as libxmtp does ------------

    async def prepare(self, conversation_id: str, payload: bytes) -> str:
        if self.fail_prepare:
            raise self.fail_prepare.pop(0)
        if conversation_id not in self.held:
            raise Unavailable("preparing a message failed: no such conversation")
        m = self.store(conversation_id, self.inbox_id, payload)
        self.prepared.append(m.id)
        return m.id

    async def publish(
        self, conversation_id: str, message_id: str, seen: Callable[[], None] = _nothing
    ) -> None:
        if self.crash_after_prepare:
            self.crash_after_prepare = False
            raise Crash("the process died before publishing")
        if self.fail_publish:
            raise self.fail_publish.pop(0)
        assert any(m.id == message_id for m in self.held[conversation_id].messages)
        self.published.append(message_id)
        seen()  # the node has it: its echo comes before libxmtp's call returns

    # --- the node, remote files, libxmtp's database: their own fakes ------------------

    def node_probe(self, gateway_url: str | None) -> Probe:
        return self.node.node_probe(gateway_url)

    async def fetch_attachment(self, reference: Mapping[str, Any]) -> bytes:
        return await self.files.fetch_attachment(reference)

    async def release_db(self) -> None:
        await self.database.release_db()

    async def reconnect_db(self) -> None:
        await self.database.reconnect_db()

    # --- the rest of the engine -------------------------------------------------------

    async def budgets(self) -> tuple[int, int]:
        return len(self.installations.ids), 1

    def v3_cutover(self) -> bool:
        return False

    def on_switch(self, handler: Callable[[], Awaitable[None]]) -> None:
        pass  # the fake never meets a cutover

    async def close(self) -> None:
        pass


def _typed(engine: FakeEngine) -> EnginePort:
    return engine  # mypy checks here that the fake is the whole engine


__all__ = ["Crash", "FakeEngine", "conversation_id", "hex_id"]

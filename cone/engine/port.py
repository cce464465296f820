"""The engine as the core sees it: its roles and plain values, without libxmtp.

Each part of the core takes the roles it uses (cone/engine/roles/: reads, sync,
directory, consent, publishing, streams, groups, node probe, attachment fetching,
libxmtp's database), each a Protocol with an in-memory fake beside it. `EnginePort`
is them all together with the engine's lifecycle: what the core's owner (`Core`)
holds. `cone.engine.engine.Engine` implements it over libxmtp.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from cone.engine.roles.attachments import AttachmentFetching
from cone.engine.roles.consent import Consents
from cone.engine.roles.database import LocalDatabase
from cone.engine.roles.directory import Directory
from cone.engine.roles.groups import Groups, Installations
from cone.engine.roles.probe import NodeAnswer, NodeView, Probes
from cone.engine.roles.publishing import Publishing
from cone.engine.roles.reads import Reads
from cone.engine.roles.streams import Streams
from cone.engine.roles.sync import Sync
from cone.engine.values import (
    Action,
    ConsentUpdate,
    ConversationInfo,
    Details,
    ListedConversation,
    Member,
    NewestStamps,
    RawMessage,
    Role,
    StreamHealth,
    SyncSummary,
    XmtpConsent,
)


class Identified(Protocol):
    """Whose engine it is: this identity's inbox id, its installation's id (hex) and
    its Ethereum address."""

    @property
    def inbox_id(self) -> str: ...

    @property
    def installation_id(self) -> str: ...

    @property
    def address(self) -> str: ...


class EnginePort(
    Identified,
    Reads,
    Sync,
    Directory,
    Consents,
    Publishing,
    Streams,
    Probes,
    AttachmentFetching,
    LocalDatabase,
    Protocol,
):
    """The whole engine: every role, and what the core's owner alone uses."""

    #: The URL of the XMTP node it talks to, and the D14N gateway's (None on V3).
    api_url: str
    gateway_url: str | None

    @property
    def backend(self) -> str:
        """The backend libxmtp runs on: `v3`, or `d14n` through a gateway."""
        ...

    @property
    def groups(self) -> Groups:
        """Group operations."""
        ...

    @property
    def installations(self) -> Installations:
        """Installation operations."""
        ...

    async def budgets(self) -> tuple[int, int]:
        """(active installations, identity updates) of this inbox."""
        ...

    def v3_cutover(self) -> bool:
        """Whether the node has refused this client as a V3 client."""
        ...

    def on_switch(self, handler: Callable[[], Awaitable[None]]) -> None:
        """Have `handler` run once libxmtp has moved from V3 to D14N at the cutover
        (`backend` is then `d14n`)."""
        ...

    async def close(self) -> None:
        """Stop the streams and release libxmtp's database."""
        ...


__all__ = [
    "Action",
    "ConsentUpdate",
    "ConversationInfo",
    "Details",
    "EnginePort",
    "Identified",
    "ListedConversation",
    "Member",
    "NewestStamps",
    "NodeAnswer",
    "NodeView",
    "RawMessage",
    "Role",
    "StreamHealth",
    "SyncSummary",
    "XmtpConsent",
]

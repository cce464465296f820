"""What the unit tests read back from the core: a conversation's consent, pending texts."""

from __future__ import annotations

from cone.core.service import Core
from cone.store import Consent, conversations


async def consent_of(core: Core, conversation_id: str) -> Consent:
    """cone's decision for a recorded conversation."""
    conv = await core.store.read(conversations.get, conversation_id)
    assert conv is not None
    return conv.consent


async def pending_texts(core: Core) -> list[str | None]:
    """The texts a receive hands the default consumer now (pending until acked)."""
    messages, _ = await core.receiving.receive("", None, 0, [])
    return [m.text for m in messages]

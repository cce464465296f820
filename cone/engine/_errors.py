"""What libxmtp's error text means: the one place that reads it.

libxmtp 1.10 reports most failures through one exception type (`FfiError`) whose only
content is text, so its meaning is found by matching that text. Every match cone
makes on libxmtp's words is here; the rest of the engine asks these functions, and
`translate` turns an error into the ConeError the core sees.

`plain` also serves cone's log, which re-emits libxmtp's own lines. `storage_full`
stays in `cone.errors`: it reads SQLite's and the OS's words for a full disk, which
cone's store meets too and libxmtp only repeats.

This module imports no xmtp-bindings (and the engine package sets nothing on import),
so the log can use it before any libxmtp client exists.
"""

from __future__ import annotations

from typing import Final

from cone.errors import (
    V3_CUTOVER,
    ConeError,
    FailedPrecondition,
    RateLimited,
    StateError,
    Unavailable,
    node_error_text,
    one_line,
    storage_full,
)

#: What libxmtp 1.10 appends to every API error: the call counts of the client.
_STATS: Final = "============ Api Stats"

V3_CUTOVER_ADVICE: Final = (
    "the XMTP node has cut over to XMTP's decentralized network (D14N) and refuses "
    "publishes and new subscriptions from V3 clients such as this cone (libxmtp 1.10); "
    "see docs/networks.md"
)


def plain(text: str) -> str:
    """libxmtp's text on one line, without the call counts ("Api Stats") it appends."""
    return one_line(text.split(_STATS, 1)[0])


def is_v3_cutover(text: str) -> bool:
    """Whether an error text is a V3 node's refusal after its cutover (node-go says
    "publishing to XMTP V3 is no longer available. Please upgrade your client to XMTP
    D14N." or "XMTP V3 streaming is no longer available. …")."""
    lowered = text.lower()
    return "xmtp v3 is no longer available" in lowered or "client to xmtp d14n" in lowered


def is_rate_limited(text: str) -> bool:
    """Whether the node refused a call for its rate limit."""
    lowered = text.lower()
    return "rate limit" in lowered or "resource_exhausted" in lowered or "429" in lowered


def is_absent(exc: BaseException | None) -> bool:
    """Whether libxmtp answered that what was looked up does not exist (an address
    or inbox with no identity on the network)."""
    lowered = str(exc).lower() if exc is not None else ""
    return "not found" in lowered or "missing" in lowered


def is_damaged_database(exc: BaseException) -> bool:
    """Whether opening libxmtp's database failed for its content (it or its salt file
    is damaged), not for a full disk."""
    text = str(exc)
    return "storage error" in text.lower() and not storage_full(text)


def cutover_refusal(doing: str) -> FailedPrecondition:
    """The V3 cutover as an error: final, not an outage (retrying cannot succeed
    until cone moves to D14N)."""
    return FailedPrecondition(f"{doing} failed: {V3_CUTOVER_ADVICE}", reason=V3_CUTOVER)


def translate(exc: BaseException, doing: str, reason: str = "network_unavailable") -> ConeError:
    """libxmtp's error as a ConeError: the V3 cutover, a full disk, the node's rate
    limit, or else Unavailable with `reason`."""
    text = plain(str(exc))
    if is_v3_cutover(text):
        return cutover_refusal(doing)
    if storage_full(text):
        return StateError(
            f"{doing} failed: the disk holding the state directory is full ({text}); "
            "free space there: reads keep working meanwhile",
            reason="storage_full",
        )
    if is_rate_limited(text):
        return RateLimited(f"XMTP rate limit while {doing}: {text}")
    return Unavailable(f"{doing} failed: {node_error_text(text)}", reason=reason)


def group_refusal(exc: BaseException, doing: str) -> ConeError | None:
    """The group-state refusals libxmtp reports, as what they are (deterministic:
    retrying cannot help), or None for anything else."""
    text = str(exc)
    if "GroupInactive" in text:
        # Removed (or left) before cone's local state knew it.
        return FailedPrecondition(
            f"{doing} failed: this identity is no longer a member of the group",
            reason="not_a_member",
            field="conversationId",
        )
    if "LeaveCantProcessed" in text or "super-admin cannot leave" in text:
        return FailedPrecondition(
            f"{doing} failed: a super admin cannot leave its group (XMTP requires another "
            "super admin first); remove the other members or keep the group",
            reason="not_permitted",
            field="conversationId",
        )
    return None


__all__ = [
    "V3_CUTOVER_ADVICE",
    "cutover_refusal",
    "group_refusal",
    "is_absent",
    "is_damaged_database",
    "is_rate_limited",
    "is_v3_cutover",
    "plain",
    "translate",
]

"""What libxmtp's error text means: the one place that reads it.

libxmtp 1.10 reports most failures through one exception type (`FfiError`) whose only
content is text, so its meaning is found by matching that text. Every match cone
makes on libxmtp's words is here; the rest of the engine asks these functions, and
`translate` turns an error into the ConeError the core sees.

A ConeError's message is the one line a person reads (a send's `lastError`, a stream's,
`cone status`, the console): cone's own sentence for the error's reason, with the
essential detail in cone's words (`detail`): never libxmtp's error chain (`[GroupError::
SyncFailedToWait] Group error: …`, `api client at endpoint … has error status: …`). That
raw text goes to the log at DEBUG (`-v`), once per translated error, for diagnosis.

`plain` also serves cone's log, which re-emits libxmtp's own lines. `storage_full`
stays in `cone.errors`: it reads SQLite's and the OS's words for a full disk, which
cone's store meets too and libxmtp only repeats.

This module imports no xmtp-bindings (and the engine package sets nothing on import),
so the log can use it before any libxmtp client exists.
"""

from __future__ import annotations

import logging
import re
from typing import Final

from cone.errors import (
    V3_CUTOVER,
    ConeError,
    FailedPrecondition,
    RateLimited,
    StateError,
    Unavailable,
    one_line,
    storage_full,
)

log = logging.getLogger(__name__)

#: What libxmtp 1.10 appends to every API error: the call counts of the client.
_STATS: Final = "============ Api Stats"

V3_CUTOVER_ADVICE: Final = (
    "the XMTP node has cut over to XMTP's decentralized network (D14N) and refuses "
    "publishes and new subscriptions from V3 clients such as this cone (libxmtp 1.10); "
    "see docs/networks.md"
)


def detail(text: str) -> str:
    """The essential detail of libxmtp's error text, in cone's words, on one line:

    - a node that cannot be connected to: "the XMTP node cannot be reached: no
      connection (MlsApi/SendGroupMessages)";
    - a node's gRPC answer (`api client at endpoint "…" has error status: '…', self:
      "…"`): "the XMTP node answered: WORDS (ReplicationApi/QueryEnvelopes)", WORDS being
      the node's own message (else the status's);
    - a publication libxmtp gave up waiting for ("Sync failed to wait for intent"): "the
      XMTP network did not confirm the publication" (libxmtp 1.10 reports every
      refused or failed publication so, whatever the node answered);
    - anything else: libxmtp's message without its `[Kind::Variant]` tags and its
      "… error:" prefixes.
    """
    line = plain(text)
    endpoint = re.search(r'endpoint "/xmtp\.[\w.]+\.(\w+/\w+)"', line)
    where = f" ({endpoint.group(1)})" if endpoint else ""
    if "tcp connect error" in line:
        return f"the XMTP node cannot be reached: no connection{where}"
    status = re.search(r"has error status: '([^']*)'(?:, self: \"([^\"]*)\")?", line)
    if status:
        words = status.group(2) or status.group(1) or "no message"
        return f"the XMTP node answered: {_lower_first(words)}{where}"
    if "failed to wait for intent" in line.lower():
        return "the XMTP network did not confirm the publication"
    bare = re.sub(r"\[\w+(?:::\w+)*\]\s*", "", line)
    while prefix := re.match(r"(?:\w+ ){0,2}error: ", bare, re.IGNORECASE):
        bare = bare[prefix.end() :]
    return _lower_first(bare.strip()) or "libxmtp gave no detail"


def _lower_first(words: str) -> str:
    # "The service is currently unavailable" reads as a clause after a colon; an
    # acronym ("XMTP", "MLS") keeps its case.
    if len(words) > 1 and words[0].isupper() and not words[1].isupper():
        return words[0].lower() + words[1:]
    return words


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
    """libxmtp's error as a ConeError whose message is cone's sentence for its reason
    (the V3 cutover, a full disk, the node's rate limit, or else Unavailable with
    `reason`) and the error's `detail`; libxmtp's own text goes to the log (DEBUG)."""
    text = plain(str(exc))
    log.debug("libxmtp, %s: %s", doing, text)
    if is_v3_cutover(text):
        return cutover_refusal(doing)
    if storage_full(text):
        return StateError(
            f"{doing} failed: the disk holding the state directory is full; free space "
            "there: reads keep working meanwhile",
            reason="storage_full",
        )
    if is_rate_limited(text):
        return RateLimited(f"{doing} failed: the XMTP network's rate limit ({detail(text)})")
    return Unavailable(f"{doing} failed: {detail(text)}", reason=reason)


def stream_error(text: str) -> str:
    """The line a person reads for what ended or refused a stream (libxmtp's text
    logged at DEBUG)."""
    log.debug("libxmtp, a stream: %s", plain(text))
    if is_v3_cutover(text):
        # The advice itself is logged once, by the engine.
        return "the stream ended: the XMTP node refuses V3 clients since its cutover to D14N"
    return f"the stream ended: {detail(text)}"


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
    "detail",
    "group_refusal",
    "is_absent",
    "is_damaged_database",
    "is_rate_limited",
    "is_v3_cutover",
    "plain",
    "stream_error",
    "translate",
]

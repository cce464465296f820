"""Sizes and budgets of the store and the receive path, and the defaults the core applies.

Request rules (ranges, lengths, patterns) are not here: they are the buf.validate
annotations of proto/conepb/v1/cone.proto (read them with `cone.rules.field_rules`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

#: A Receive, Peek, Conversations or Messages page when `limit` is absent.
RECEIVE_LIMIT_DEFAULT: Final = 50
#: The most text or JSON data one stored message keeps, as UTF-8 after decompression
#: and decoding; larger incoming content is stored as unreadable (cone.core.content).
CONTENT_MAX_BYTES: Final = 1024 * 1024
#: The most one stored message may carry, all its fields together as UTF-8: its content
#: plus at most 64 KiB of the rest (fallback ≤ 4,096 characters, labels ≤ 256, ids).
MESSAGE_MAX_BYTES: Final = CONTENT_MAX_BYTES + 64 * 1024
#: A receive batch stops adding messages once their size (`inbox.message_size`) would
#: pass this; it always holds at least one message. With JSON's worst escaping (6 bytes
#: per control character, 13 through MCP's text-plus-structured result) a batch stays
#: under 16 MiB on every wire, and under gRPC's default 4 MiB receive limit.
RECEIVE_BATCH_BYTES: Final = 1024 * 1024
#: Calls into the core a client keeps in flight at once (more wait their turn): long
#: polls (`receive`) and the rest each have their own room, so waiting receives never
#: delay an `identity` (cone.facades._pool over gRPC, cone.daemon.in_process in process).
LONG_POLLS_IN_FLIGHT: Final = 768
CALLS_IN_FLIGHT: Final = 256
#: The consumer when none is given.
DEFAULT_CONSUMER: Final = "default"
# Receive hands a file's bytes inline when it is at most this large and the batch's
# inline bytes stay within the budget; otherwise the `attachment` call fetches them.
ATTACHMENT_INLINE_MAX_BYTES: Final = 256 * 1024
RECEIVE_INLINE_BUDGET_BYTES: Final = 1024 * 1024
# The largest remote attachment cone downloads (its encrypted payload).
REMOTE_ATTACHMENT_MAX_BYTES: Final = 10 * 1024 * 1024


@dataclass(frozen=True)
class RequestBudget:
    """What conversations not accepted (requests, and blocked ones) may hold in cone's
    store, counted as messages and as bytes (`cone.store.held.message_bytes`): against
    the inbox that brought each one (a DM's peer, a group's inviter), and in all.
    A message over either is dropped at ingest and counted (docs/guarantees.md).
    The environment sets each one (`from_environment`); tests lower them."""

    #: Messages one sender's requests hold (`CONE_REQUEST_SENDER_MESSAGES`).
    sender_messages: int = 200
    #: Bytes one sender's requests hold (`CONE_REQUEST_SENDER_BYTES`).
    sender_bytes: int = 2 * 1024 * 1024
    #: Messages all requests hold together (`CONE_REQUEST_TOTAL_MESSAGES`).
    total_messages: int = 5000
    #: Bytes all requests hold together (`CONE_REQUEST_TOTAL_BYTES`).
    total_bytes: int = 64 * 1024 * 1024

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> RequestBudget:
        """The defaults, with each one the environment sets (a whole number ≥ 0)."""
        values: dict[str, int] = {}
        for name, variable in REQUEST_BUDGET_ENV.items():
            text = environ.get(variable)
            if text is None or text == "":
                continue
            if not text.strip().isdigit():
                from cone.errors import InvalidArgument

                raise InvalidArgument(
                    f"{variable} must be a whole number (0 or more), not {text!r}",
                    field=variable,
                )
            values[name] = int(text)
        return cls(**values)


#: The environment variable of each field of `RequestBudget`.
REQUEST_BUDGET_ENV: Final = {
    "sender_messages": "CONE_REQUEST_SENDER_MESSAGES",
    "sender_bytes": "CONE_REQUEST_SENDER_BYTES",
    "total_messages": "CONE_REQUEST_TOTAL_MESSAGES",
    "total_bytes": "CONE_REQUEST_TOTAL_BYTES",
}

#: The budget when neither the environment nor a test sets one.
REQUEST_BUDGET: Final = RequestBudget()

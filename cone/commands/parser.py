"""The arguments of the operator's commands (`cone status`, `cone send`, ...).

`cli.py` calls `add_commands` with its shared state flags; every command here runs
through `cone.commands.command`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

MODULE: Final = "cone.commands.command"
COMMANDS: Final = (
    "init",
    "status",
    "send",
    "reply",
    "connect",
    "requests",
    "accept",
    "block",
    "unblock",
    "conversations",
    "messages",
    "contacts",
    "group",
    "sync",
    "tail",
)


# What a conversation argument takes: what `send` takes (cone/commands/_conversation.py).
_CONVERSATION: Final = "a conversation id, or a contact name, inbox id or address (the DM with it)"


def _json(p: argparse.ArgumentParser, help_text: str | None = None) -> None:
    p.add_argument(
        "--json",
        action="store_true",
        help=help_text or "print one JSON document on stdout (the JSON-RPC result's shape)",
    )


def add_commands(sub: SubParsers, add_state: Callable[[argparse.ArgumentParser], None]) -> None:
    """Register the operator's commands on `sub`; `add_state` adds --home and the rest."""

    def command(
        name: str, help_text: str, description: str | None = None
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=description or help_text)
        return p

    p = command(
        "init",
        "create this state directory's identity, or show the one it has",
        "Create the identity (a new wallet key, registered on the network) or show the "
        "existing one: address, inbox id, network, where the key lives, what to do next.",
    )
    add_state(p)
    p.add_argument(
        "--wallet-key-file",
        help="import this wallet key (64 hex) instead of making one (default: $CONE_WALLET_KEY)",
    )
    _json(p)

    p = command(
        "status",
        "health at a glance; exits non-zero when unhealthy (a health check)",
        "Ask the process holding the identity for its health: network, streams, last sync, "
        "pending messages per consumer, requests, outbox, budgets, warnings. Exit 0 healthy, "
        "1 unhealthy, 5 when no process holds the identity.",
    )
    add_state(p)
    _json(p)

    p = command(
        "send",
        "send one message to an address, inbox id, contact name or conversation id",
        "Send TEXT to TO, or a reaction (--react) or a file (--file). The send key makes "
        "retrying safe: the same key never sends twice. Without --key a new key is made and "
        "printed; reuse it to retry.",
    )
    p.add_argument(
        "to", metavar="TO", help="address (0x...), inbox id, contact name or conversation id"
    )
    p.add_argument("text", metavar="TEXT", nargs="?", help="the message text")
    p.add_argument(
        "--react",
        nargs=2,
        metavar=("MESSAGE", "EMOJI"),
        help="react to the message MESSAGE (its id) with EMOJI instead of sending TEXT",
    )
    p.add_argument(
        "--file",
        metavar="PATH",
        help="send the file at PATH as an attachment (at most 1000000 bytes) instead of TEXT",
    )
    p.add_argument("--key", help="the send key (default: a new one, printed)")
    p.add_argument("--markdown", action="store_true", help="send TEXT as markdown")
    p.add_argument("--reply-to", metavar="ID", help="the messageId this message replies to")
    add_state(p)
    _json(p)

    p = command(
        "reply",
        "reply with text in an accepted conversation",
        "Reply with TEXT in CONVERSATION (a conversation id, or a contact name, inbox id "
        "or address: the DM with it). Without --key a new key is "
        "made and printed; reuse it to retry.",
    )
    p.add_argument("conversation", metavar="CONVERSATION", help=_CONVERSATION)
    p.add_argument("text", metavar="TEXT", help="the reply text")
    p.add_argument("--key", help="the send key (default: a new one, printed)")
    add_state(p)
    _json(p)

    p = command(
        "connect",
        "open (and accept) the direct conversation with an address or inbox id",
        "Find or create the DM with TO, accept it and save the contact, optionally as NAME.",
    )
    p.add_argument("to", metavar="TO", help="address (0x...), inbox id or contact name")
    p.add_argument("--name", help="save the contact under this name (usable as TO later)")
    add_state(p)
    _json(p)

    p = command(
        "requests",
        "conversations from unknown senders, waiting for accept or block",
        "List the conversations held as requests (identities only, never content).",
    )
    add_state(p)
    _json(p)

    for name, verb in (("accept", "accept"), ("block", "block")):
        what = (
            "its pending and future messages enter receive"
            if name == "accept"
            else "for a DM, also its peer everywhere"
        )
        p = command(name, f"{verb} a conversation held as a request ({what})")
        p.add_argument("conversation", metavar="ID", help=_CONVERSATION)
        add_state(p)
        _json(p)

    p = command(
        "unblock",
        "turn a blocked conversation back into a request (not an accepted one)",
        "Undo a block: the conversation becomes a request again (accept it to let its "
        "messages in); for a DM the peer is unblocked everywhere.",
    )
    p.add_argument("conversation", metavar="ID", help=_CONVERSATION)
    add_state(p)
    _json(p)

    p = command(
        "conversations",
        "the conversations this identity is part of, most recently active first",
        "List conversations: id, type, consent, the peer or the group's name and members, "
        "last message time and pending count. Pages with --cursor.",
    )
    p.add_argument("--consent", choices=("requested", "accepted", "blocked"))
    p.add_argument("--type", choices=("dm", "group"))
    p.add_argument("--limit", type=int, help="at most this many (1-1000, default 50)")
    p.add_argument("--cursor", help="the cursor a previous page printed")
    add_state(p)
    _json(p)

    p = command(
        "messages",
        "read back a conversation's history (yours included), newest first",
        "Print an accepted conversation's history, acknowledged or not, with your own "
        "messages; reading changes no receipt. Page with --before/--after a message id.",
    )
    p.add_argument("conversation", metavar="ID", help=_CONVERSATION)
    p.add_argument("--limit", type=int, help="at most this many (1-1000, default 50)")
    p.add_argument("--before", metavar="MESSAGE", help="only messages before this message id")
    p.add_argument("--after", metavar="MESSAGE", help="only messages after this message id")
    p.add_argument("--oldest-first", action="store_true", help="oldest first")
    add_state(p)
    _json(p)

    p = command("contacts", "the saved contacts", "List the saved contacts.")
    add_state(p)
    _json(p)

    p = command(
        "group",
        "create and manage groups",
        "Create a group, list its members, add or remove members, leave it or change its "
        "name, description or image. MEMBER is an address, inbox id or contact name.",
    )
    groups = p.add_subparsers(dest="group_command", metavar="ACTION", required=True)
    g = groups.add_parser("create", help="create a group (accepted), keyed like a send")
    g.add_argument("members", metavar="MEMBER", nargs="+")
    g.add_argument("--key", help="the key: one group per key (default: a new one, printed)")
    g.add_argument("--name")
    g.add_argument("--description")
    g.add_argument("--image-url")
    add_state(g)
    _json(g)
    g = groups.add_parser("members", help="a group's members and their roles")
    g.add_argument("conversation", metavar="ID", help=_CONVERSATION)
    add_state(g)
    _json(g)
    for action, what in (("add", "add members"), ("remove", "remove members")):
        g = groups.add_parser(action, help=f"{what} (if the group's permissions allow)")
        g.add_argument("conversation", metavar="ID", help=_CONVERSATION)
        g.add_argument("members", metavar="MEMBER", nargs="+")
        add_state(g)
        _json(g)
    g = groups.add_parser("leave", help="leave a group; its messages stop arriving at once")
    g.add_argument("conversation", metavar="ID", help=_CONVERSATION)
    add_state(g)
    _json(g)
    g = groups.add_parser("update", help="change a group's name, description or image URL")
    g.add_argument("conversation", metavar="ID", help=_CONVERSATION)
    g.add_argument("--name")
    g.add_argument("--description")
    g.add_argument("--image-url")
    add_state(g)
    _json(g)

    p = command(
        "sync",
        "fetch welcomes, conversations, messages and consent from the network now",
        "Sync with the XMTP node now and ingest what it has (a running identity also "
        "catches up by itself, every 30 s). Fails when the node cannot be reached.",
    )
    add_state(p)
    _json(p)

    p = command(
        "tail",
        "follow incoming messages, one line each",
        "Print messages as they arrive in accepted conversations: time, conversation, "
        "sender and text (or a summary of the content). Without --ack nothing is "
        "acknowledged or counted as delivered; with --ack each printed message is "
        "acknowledged for the consumer. Stop with Ctrl-C.",
    )
    p.add_argument(
        "--consumer",
        help="start with the messages pending for this consumer (with --ack: the consumer "
        "to receive and acknowledge as; default `default`)",
    )
    p.add_argument("--ack", action="store_true", help="acknowledge each message printed")
    add_state(p)
    _json(p, "print one JSON document per line, one per message (shaped as in receive)")


__all__ = ["COMMANDS", "MODULE", "add_commands"]

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
    "tail",
)


def _json(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document on stdout (the JSON-RPC result's shape)",
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
        "Send TEXT to TO. The send key makes retrying safe: the same key never sends twice. "
        "Without --key a new key is made and printed; reuse it to retry.",
    )
    p.add_argument(
        "to", metavar="TO", help="address (0x...), inbox id, contact name or conversation id"
    )
    p.add_argument("text", metavar="TEXT", help="the message text")
    p.add_argument("--key", help="the send key (default: a new one, printed)")
    p.add_argument("--markdown", action="store_true", help="send TEXT as markdown")
    p.add_argument("--reply-to", metavar="ID", help="the messageId this message replies to")
    add_state(p)
    _json(p)

    p = command(
        "reply",
        "reply with text in an accepted conversation",
        "Reply with TEXT in CONVERSATION (a conversation id). Without --key a new key is "
        "made and printed; reuse it to retry.",
    )
    p.add_argument("conversation", metavar="CONVERSATION", help="the conversation id (hex)")
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
        p.add_argument("conversation", metavar="ID", help="the conversation id (hex)")
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
    _json(p)


__all__ = ["COMMANDS", "MODULE", "add_commands"]

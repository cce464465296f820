"""Forming turns from a batch of pending messages.

One batch may hold messages of many conversations. For each conversation:

- an open turn in the journal (a crash interrupted it): the turn is formed again from
  those same messages, with the same turn id and reply key;
- a DM: every pending message of the batch up to the last one that starts a turn is
  one turn (all of them are its messages); later ones stay pending for the next turn;
- a group: the turn ends at the last message that addresses `@alias`. Its messages
  are the addressing ones; the others up to that point join the held context. Later
  messages stay pending for the next turn. A group batch with no addressing message
  starts no turn: its messages become context (acknowledged at once, kept by the
  context consumer; see `_context`).

A reaction starts no turn unless `reactions` is on (`--reactions`): a DM batch of
reactions only becomes context for the next turn, like unaddressed group messages.
With reactions on, a reaction starts a DM turn, and in a group it addresses the agent
when it reacts to one of the agent's own messages (the reaction names the sender of
the message it reacts to).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cone.bridge._address import addresses
from cone.bridge._journal import OpenTurn
from conepb.v1 import cone_pb2 as pb


def kind(message: pb.Message) -> str:
    """`dm` or `group`."""
    return "group" if message.conversation_type == pb.CONVERSATION_TYPE_GROUP else "dm"


@dataclass
class Turn:
    """The pending messages of one conversation that one command invocation answers."""

    conversation_id: str
    conversation_type: str
    messages: list[pb.Message]
    #: Every message id the turn acknowledges when it ends (messages and inline context).
    ack_ids: list[str]
    #: Unaddressed group messages handed over as context (inline ones included).
    inline_context: list[pb.Message] = field(default_factory=list)
    #: The turn id when the journal fixed it (a turn formed again after a crash).
    fixed_id: str | None = None
    #: A DM turn's messages are acknowledged on the context consumer (see `_loop`).
    context_acked: bool = False

    @property
    def turn_id(self) -> str:
        """Stable across retries and restarts: the last incoming message id."""
        return self.fixed_id or self.ack_ids[-1]

    @property
    def reply_key(self) -> str:
        """The send key of the turn's reply."""
        return f"reply:{self.turn_id}"


@dataclass
class Plan:
    """What to do with one batch."""

    turns: list[Turn] = field(default_factory=list)
    #: Unaddressed group messages that start no turn: ack now and hold as context.
    context: list[pb.Message] = field(default_factory=list)
    #: Conversations whose journal entry is stale (its messages were acknowledged).
    stale: list[str] = field(default_factory=list)


def _by_conversation(batch: list[pb.Message]) -> dict[str, list[pb.Message]]:
    out: dict[str, list[pb.Message]] = {}
    for message in batch:
        out.setdefault(message.conversation_id, []).append(message)
    return out


@dataclass(frozen=True)
class Rules:
    """What starts a turn: the group alias, and whether reactions count."""

    alias: str | None = None
    reactions: bool = False
    own_inbox_id: str = ""

    def starts_dm_turn(self, message: pb.Message) -> bool:
        """Whether a DM message starts a turn."""
        return self.reactions or not message.HasField("reaction")

    def addressed(self, message: pb.Message) -> bool:
        """Whether a group message addresses the agent."""
        if message.HasField("reaction"):
            mine = message.reaction.reference_inbox_id == self.own_inbox_id
            return self.reactions and bool(self.own_inbox_id) and mine
        return message.HasField("text") and addresses(message.text, self.alias)


def _dm_turn(cid: str, messages: list[pb.Message], rules: Rules) -> Turn | None:
    last = max((i for i, m in enumerate(messages) if rules.starts_dm_turn(m)), default=-1)
    if last < 0:
        return None
    head = messages[: last + 1]
    return Turn(cid, "dm", head, [m.message_id for m in head])


def _group_turn(cid: str, messages: list[pb.Message], rules: Rules) -> Turn | None:
    last = max((i for i, m in enumerate(messages) if rules.addressed(m)), default=-1)
    if last < 0:
        return None
    head = messages[: last + 1]
    return Turn(
        cid,
        "group",
        messages=[m for m in head if rules.addressed(m)],
        ack_ids=[m.message_id for m in head],
        inline_context=[m for m in head if not rules.addressed(m)],
    )


def plan(
    batch: list[pb.Message],
    alias: str | None,
    open_turns: dict[str, OpenTurn],
    rules: Rules | None = None,
) -> Plan:
    """Turns and context for `batch` (oldest first), per the module docstring; `rules`
    (default: the alias, reactions off) say what starts a turn."""
    rules = rules or Rules(alias)
    out = Plan()
    for cid, messages in _by_conversation(batch).items():
        ctype = kind(messages[0])
        journal = open_turns.get(cid)
        if journal is not None:
            ids = set(journal.message_ids)
            again = [m for m in messages if m.message_id in ids]
            if again:
                turn = Turn(cid, ctype, again, [m.message_id for m in again], [], journal.turn_id)
                if ctype == "group":
                    turn.messages = [m for m in again if rules.addressed(m)] or again
                    turn.inline_context = [m for m in again if m not in turn.messages]
                out.turns.append(turn)
                continue
            out.stale.append(cid)
        if ctype == "dm":
            direct = _dm_turn(cid, messages, rules)
            if direct is None:
                out.context.extend(messages)
            else:
                out.turns.append(direct)
            continue
        addressed = _group_turn(cid, messages, rules)
        if addressed is None:
            out.context.extend(messages)
        else:
            out.turns.append(addressed)
    return out


__all__ = ["Plan", "Rules", "Turn", "kind", "plan"]

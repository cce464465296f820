"""The readable form of each command's result (the `--json` form is the result itself).

Everything a peer controls (text, fallback, content type, names) passes through
`clean()` first: control characters, escape sequences included, never reach the
operator's terminal.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any, Final

JsonObject = dict[str, Any]

# C0 controls (tab and newline handled by the caller), DEL, C1 controls, and the
# bidirectional overrides that could make a line read differently from its bytes.
_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
SUMMARY_CHARS: Final = 200


def clean(text: str) -> str:
    """`text` safe for a terminal line: newlines as ⏎, other controls as �."""
    text = text.replace("\r\n", "\n").replace("\n", " ⏎ ").replace("\t", " ")
    return _CONTROL.sub("\ufffd", text)


def _short(text: str, limit: int = SUMMARY_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _when(rfc3339: str | None, now: datetime | None = None) -> str:
    if not rfc3339:
        return "never"
    at = datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
    seconds = ((now or datetime.now(UTC)) - at).total_seconds()
    if seconds < 1:
        return "just now"
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return at.strftime("%Y-%m-%d %H:%M UTC")


def _clock(rfc3339: str | None) -> str:
    if not rfc3339:
        return "--:--:--"
    at = datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).astimezone()
    return at.strftime("%H:%M:%S")


# ---- status ---------------------------------------------------------------------------


# networkState in words (docs/networks.md).
_NETWORK: Final = {
    "reachable": "reachable",
    "unreachable": "UNREACHABLE (the node does not answer now)",
    "identity_unknown": "IDENTITY UNKNOWN (the node does not know this identity: node reset? "
    "wrong network?)",
    "v3_cutover": "V3 CUTOVER (the node refuses this cone's publications)",
}


def problems(status: JsonObject) -> list[str]:
    """Why a status is unhealthy (empty: healthy)."""
    out = []
    state = status.get("networkState", "reachable")
    if state != "reachable":
        out.append(f"network {_NETWORK.get(state, state)}")
    down = [s["name"] for s in status.get("streams", []) if not s.get("connected")]
    if down:
        out.append(f"stream(s) down: {', '.join(down)}")
    if status.get("lastSyncError"):
        out.append(f"the last sync failed: {status['lastSyncError']}")
    failing = [o for o in status.get("outbox", []) if o.get("state") == "failing"]
    if failing:
        out.append(f"{len(failing)} outgoing message(s) failing")
    return out


def status(s: JsonObject) -> str:
    """The status report, healthy or not."""
    trouble = problems(s)
    lines = ["cone status: " + ("healthy" if not trouble else "UNHEALTHY: " + "; ".join(trouble))]
    ident = s.get("identity") or {}
    lines.append(
        f"  identity    {ident.get('address', '?')} on {ident.get('network', '?')}"
        f" over {str(ident.get('backend', '?')).upper()} (inbox {ident.get('inboxId', '?')})"
    )
    # What the node answers now (networkState), then how the last sync went.
    network = _NETWORK.get(s.get("networkState", "reachable"), str(s.get("networkState")))
    if s.get("lastSyncError"):
        network += (
            f"; last sync failed ({s['lastSyncError']}); last good sync "
            f"{_when(s.get('lastSyncAt'))}"
        )
    else:
        network += f"; last sync {_when(s.get('lastSyncAt'))}"
    lines.append(f"  network     {network}")
    streams = []
    for st in s.get("streams", []):
        state = "up" if st.get("connected") else "DOWN"
        extra = f", {st['restarts']} restart(s)" if st.get("restarts") else ""
        if not st.get("connected") and st.get("lastError"):
            extra += f": {clean(st['lastError'])}"
        streams.append(f"{st['name']} {state}{extra}")
    lines.append(f"  streams     {'; '.join(streams) or 'none'}")
    consumers = ", ".join(f"{c['consumer']} {c['pending']}" for c in s.get("consumers", []))
    lines.append(
        f"  inbox       {s.get('inboxMessages', 0)} message(s); pending per consumer: "
        f"{consumers or 'no consumer yet'}"
    )
    js = s.get("jetstream")
    if js:
        behind = next(
            (c["pending"] for c in s.get("consumers", []) if c["consumer"] == js["consumer"]), 0
        )
        state = "reachable" if js.get("reachable") else "UNREACHABLE"
        why = f" ({clean(js['error'])})" if js.get("error") else ""
        lines.append(
            f"  jetstream   {js['servers']} {state}{why}; export {behind} behind "
            f"(consumer {js['consumer']})"
        )
    requests = s.get("requests", 0)
    hint = " (see `cone requests`)" if requests else ""
    dropped = int(s.get("requestsDropped", 0))
    if dropped:
        hint += f"; {dropped} message(s) dropped over the request budget"
    lines.append(f"  requests    {requests}{hint}")
    outbox = s.get("outbox", [])
    if not outbox:
        lines.append("  outbox      empty")
    else:
        lines.append(f"  outbox      {len(outbox)} unsettled")
        for o in outbox:
            err = f": {clean(o['lastError'])}" if o.get("lastError") else ""
            why = f" ({clean(o['lastReason'])})" if o.get("lastReason") else ""
            lines.append(
                f"    key {clean(o['key'])} in {o['conversationId']}: {o['state']}{why} after "
                f"{o['attempts']} attempt(s){err}"
            )
    lines.append(
        f"  budgets     installations {s.get('installations', 0)}/10, identity updates "
        f"{s.get('identityUpdates', 0)}/256"
    )
    for w in s.get("warnings", []):
        lines.append(f"  warning     {w}")
    return "\n".join(lines)


# ---- sending --------------------------------------------------------------------------


def sent(result: JsonObject, key: str, generated: bool, hosted: bool) -> str:
    """One line for a send or reply, and what to do when it is not yet published."""
    mid, cid = result["messageId"], result["conversationId"]
    if result.get("deduplicated"):
        line = f"already sent as {mid} in {cid}: key {key!r} was used before; nothing new sent"
    elif result.get("published"):
        line = f"sent {mid} in {cid}"
    else:
        retry = result.get("retryAfterMs")
        when = f" (next attempt in {retry / 1000:.1f} s)" if retry else ""
        line = f"queued {mid} in {cid}: the network has not accepted it yet{when}"
        if hosted:
            line += "; it is retried whenever this identity runs (`cone daemon`)"
    if generated:
        line += f"\nkey {key} (reuse it with --key to retry without sending twice)"
    return line


def contact(result: JsonObject) -> str:
    """The saved contact."""
    c = result.get("contact") or {}
    name = f" as {c['name']}" if c.get("name") else ""
    who = c.get("address") or c.get("inboxId", "?")
    return (
        f"connected with {who}{name}: conversation {c.get('conversationId', '?')} (accepted)\n"
        f"send with: cone send {c.get('name') or who} TEXT"
    )


#: The line under an answer marked `stale` (docs/cli.md).
STALE: Final = (
    "(from the store: the XMTP node does not answer or does not know this identity now, "
    "so this may be stale; see `cone status`)"
)


def _stale(result: JsonObject, text: str) -> str:
    return f"{text}\n{STALE}" if result.get("stale") else text


def requests(result: JsonObject, groups: dict[str, JsonObject] | None = None) -> str:
    """The requests table, or a line saying there are none; a group request shows the
    group's name and member count where `groups` (the listing, by id) has them."""
    held = result.get("requests", [])
    if not held:
        return _stale(result, "no requests")
    lines = [f"{len(held)} request(s); accept with `cone accept ID`, refuse with `cone block ID`:"]
    for r in held:
        who = r.get("peerAddress") or f"inbox {r.get('peerInboxId', '?')}"
        what = r.get("conversationType", "?")
        listed = (groups or {}).get(r["conversationId"])
        if listed is not None:
            name = clean(listed.get("name") or "(no name)")
            what = f"group {name} ({listed.get('memberCount', '?')} members),"
        since = _when(r.get("firstSeenAt"))
        lines.append(
            f"  {r['conversationId']}  {what:<5}  from {who}  "
            f"since {since}  {r.get('pendingMessages', 0)} message(s) waiting"
        )
    return _stale(result, "\n".join(lines))


# ---- messages -------------------------------------------------------------------------


def content(m: JsonObject) -> str:
    """The text of a message, or a summary of its content."""
    if m.get("unreadable"):
        return f"[unreadable: {clean(m['unreadable'])}]"
    if "text" in m:
        return clean(m["text"])
    if "data" in m:
        data = json.dumps(m["data"], ensure_ascii=False, separators=(",", ":"))
        return f"[data] {_short(clean(data))}"
    kind = clean(m.get("contentType", "?"))
    fallback = f" {_short(clean(m['fallback']))}" if m.get("fallback") else ""
    return f"[{kind}]{fallback}"


def label(inbox_id: str) -> str:
    """An inbox id shortened for reading, marked as shortened (never taken back as an id:
    `--json` has it in full)."""
    return inbox_id if len(inbox_id) <= 8 else inbox_id[:8] + "…"


def message_line(m: JsonObject) -> str:
    """One line of `cone tail`: time, conversation, sender, content (ids a command takes
    back, the conversation's and a reply's target, in full)."""
    sender = m.get("senderInboxId", "")
    reply = f" (reply to {m['replyTo']})" if m.get("replyTo") else ""
    return (
        f"{_clock(m.get('sentAt'))}  {m.get('conversationId', '?')}  {label(sender)}  "
        f"{content(m)}{reply}"
    )


__all__ = ["clean", "contact", "content", "message_line", "problems", "requests", "sent", "status"]


# ---- conversations, history, groups ---------------------------------------------------


def conversations(result: JsonObject) -> str:
    """One line per conversation, and how to get the next page."""
    found = result.get("conversations", [])
    if not found:
        return _stale(result, "no conversations")
    lines = []
    for c in found:
        if c.get("conversationType") == "group":
            who = (
                f"group {clean(c.get('name') or '(no name)')} ({c.get('memberCount', '?')} members)"
            )
        else:
            who = c.get("contactName") or c.get("peerAddress") or f"inbox {c.get('peerInboxId')}"
        last = _when(c.get("lastMessageAt")) if c.get("lastMessageAt") else "no messages"
        lines.append(
            f"{c['conversationId']}  {c.get('consent', '?'):<9}  {clean(str(who))}  "
            f"last {last}  {c.get('pendingMessages', 0)} pending"
        )
    if result.get("cursor"):
        lines.append(f"more: --cursor {result['cursor']}")
    return _stale(result, "\n".join(lines))


def history(result: JsonObject, *, oldest_first: bool = False) -> str:
    """One line per message of a conversation's history, ids in full (as --before and
    --after take them), and the command line's flag for the next page."""
    found = result.get("messages", [])
    if not found:
        return _stale(result, "no messages")
    lines = []
    for m in found:
        who = "me" if m.get("own") else label(m.get("senderInboxId", "?"))
        state = " [deleted]" if m.get("deleted") else " [expired]" if m.get("expired") else ""
        lines.append(f"{_clock(m.get('sentAt'))}  {m['messageId']}  {who}: {content(m)}{state}")
    if result.get("more"):
        edge = found[-1]["messageId"]
        flag = "--after" if oldest_first else "--before"
        lines.append(f"more: page on with {flag} {edge}")
    return _stale(result, "\n".join(lines))


def contacts(result: JsonObject) -> str:
    """One line per saved contact."""
    found = result.get("contacts", [])
    if not found:
        return "no contacts"
    return "\n".join(
        f"{clean(c.get('name') or '-'):<16}  {c.get('address') or '-'}  inbox {c.get('inboxId')}  "
        f"dm {c.get('conversationId')}"
        for c in found
    )


def group(g: JsonObject) -> str:
    """A group in a few words."""
    return (
        f"group {g['conversationId']}: {clean(g.get('name') or '(no name)')}, "
        f"{g.get('memberCount', '?')} members, {g.get('consent', '?')}"
    )


def members(result: JsonObject) -> str:
    """One line per member, with its role."""
    return "\n".join(
        f"{m.get('role', '?'):<11}  inbox {m['inboxId']}  {', '.join(m.get('addresses', []))}"
        for m in result.get("members", [])
    )

// Who is who: an inbox id becomes a person's name where the console knows one (a saved
// contact's name), else a short address (0x1234…abcd), never a bare inbox id prefix
// unless nothing else is known yet. Learnt from contacts, conversations, requests and
// group members as the console reads them; times read as people read them.

const known = new Map(); // inbox id -> { name, address }
let me = null;

export function setMe(inboxId, address) {
  me = inboxId;
  learn(inboxId, { address });
}

export function isMe(inboxId) {
  return inboxId === me;
}

// Records what a read said about an inbox; a saved name wins over an address.
export function learn(inboxId, { name, address } = {}) {
  if (!inboxId) return;
  const entry = known.get(inboxId) || {};
  if (name) entry.name = name;
  if (address) entry.address = address;
  known.set(inboxId, entry);
}

export function shortAddress(address) {
  return address.length > 14 ? address.slice(0, 6) + "…" + address.slice(-4) : address;
}

// The name shown for an inbox: "you", a contact's name, a short address, or as a last
// resort "inbox e621…" (until a read says more).
export function nameOf(inboxId) {
  if (inboxId && inboxId === me) return "you";
  const entry = known.get(inboxId);
  if (entry?.name) return entry.name;
  if (entry?.address) return shortAddress(entry.address);
  return inboxId ? "inbox " + inboxId.slice(0, 6) + "…" : "?";
}

// The longer form, for a tooltip: name, address and inbox id.
export function fullName(inboxId) {
  const entry = known.get(inboxId) || {};
  return [entry.name, entry.address, inboxId && "inbox " + inboxId].filter(Boolean).join(" · ");
}

// A conversation's title: a group's name, a DM's peer by name.
export function titleOf(c) {
  if (c.conversationType === "group") return c.name || "unnamed group";
  learn(c.peerInboxId, { name: c.contactName, address: c.peerAddress });
  return nameOf(c.peerInboxId);
}

// ---- times ----------------------------------------------------------------------

const pad = (n) => String(n).padStart(2, "0");
const DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

function dayStart(date) {
  return new Date(date.getFullYear(), date.getMonth(), date.getDate()).getTime();
}

// `12:01` today, `yesterday 18:40`, `Mon 18:40` this week, `3 Dec 18:40` this year,
// `3 Dec 2025` before; "" for no time.
export function when(iso, now = new Date()) {
  if (!iso) return "";
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return "";
  const clock = pad(at.getHours()) + ":" + pad(at.getMinutes());
  const days = Math.round((dayStart(now) - dayStart(at)) / 86400000);
  if (days <= 0) return clock;
  if (days === 1) return "yesterday " + clock;
  if (days < 7) return DAYS[at.getDay()] + " " + clock;
  const date = at.getDate() + " " + MONTHS[at.getMonth()];
  return at.getFullYear() === now.getFullYear() ? date + " " + clock : date + " " + at.getFullYear();
}

// The full stamp, for a tooltip: `2026-12-07 12:01:33 (UTC+01:00)`.
export function stamp(iso) {
  if (!iso) return "";
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return "";
  const offset = -at.getTimezoneOffset();
  const sign = offset >= 0 ? "+" : "-";
  const zone = "UTC" + sign + pad(Math.floor(Math.abs(offset) / 60)) + ":" + pad(Math.abs(offset) % 60);
  return at.getFullYear() + "-" + pad(at.getMonth() + 1) + "-" + pad(at.getDate()) + " " +
    pad(at.getHours()) + ":" + pad(at.getMinutes()) + ":" + pad(at.getSeconds()) + " (" + zone + ")";
}

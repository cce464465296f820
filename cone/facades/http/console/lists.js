// The side bar: requests, conversations by last activity (each with its last message's
// preview and time, moving up as a message arrives), and the outbox.
import { rpc, rpcBatch } from "./api.js";
import { isMe, learn, nameOf, shortAddress, stamp, titleOf, when } from "./people.js";
import { button, el, summary } from "./render.js";

const CONSUMER = "console";
const $ = (id) => document.getElementById(id);

let byId = new Map(); // conversation id -> summary from `conversations`
let requests = [];
let count = null; // how many requests the list shows
const previews = new Map(); // conversation id -> { at, text, sender } of its newest message
let openId = null;
let actions = { open: async () => {}, openRequest: async () => {}, close: () => {} };

export function setup(handlers) {
  actions = handlers;
}

export function conversation(conversationId) {
  return byId.get(conversationId);
}

export function requestCount() {
  return count;
}

export function markOpen(conversationId) {
  openId = conversationId;
  for (const li of document.querySelectorAll("#side li[data-id]")) {
    li.classList.toggle("open", li.dataset.id === conversationId);
  }
}

// The line under a conversation's title in the chat header.
export function subtitle(c) {
  if (c.conversationType === "group") {
    const n = c.memberCount ? c.memberCount + " members" : "group";
    return c.active === false ? n + " · you left" : n;
  }
  return [c.peerAddress, c.consent === "blocked" ? "blocked" : null].filter(Boolean).join(" · ");
}

function activity(c) {
  const times = [c.lastMessageAt, c.createdAt, previews.get(c.conversationId)?.at].filter(Boolean);
  return Math.max(0, ...times.map((t) => Date.parse(t) || 0));
}

// A message the console saw (from the event stream, or sent here): its conversation's
// preview and place in the list, at once.
export function arrived(m) {
  noteActivity(m, summary(m));
}

function noteActivity(m, text) {
  const known = previews.get(m.conversationId);
  if (known && Date.parse(known.at) > Date.parse(m.sentAt || 0)) return;
  previews.set(m.conversationId, {
    at: m.sentAt, text, sender: m.own ? "me" : m.senderInboxId, reaction: !!m.reaction,
  });
  const c = byId.get(m.conversationId);
  if (c && m.sentAt && (!c.lastMessageAt || Date.parse(c.lastMessageAt) < Date.parse(m.sentAt))) {
    c.lastMessageAt = m.sentAt;
  }
  drawConversations();
}

// Reads each accepted conversation's newest message where the list's time moved since
// the preview was read: one batch, not one call per conversation.
async function readPreviews(convs) {
  const stale = convs.filter((c) => {
    if (c.consent !== "accepted" || !c.lastMessageAt) return false;
    const known = previews.get(c.conversationId);
    return !known || Date.parse(known.at) < Date.parse(c.lastMessageAt);
  });
  for (let i = 0; i < stale.length; i += 50) {
    const part = stale.slice(i, i + 50);
    const answers = await rpcBatch(part.map((c) => ["messages", { conversationId: c.conversationId, limit: 1 }]));
    answers.forEach((a, j) => {
      const m = a instanceof Error ? null : a.messages[0];
      if (m) arrived({ ...m, conversationId: part[j].conversationId });
    });
  }
}

export async function refresh() {
  const [reqs, convs] = await Promise.all([
    rpc("requests"),
    rpc("conversations", { consumer: CONSUMER, limit: 200 }),
  ]);
  requests = reqs.requests;
  count = requests.length;
  for (const r of requests) learn(r.peerInboxId, { address: r.peerAddress });
  byId = new Map(convs.conversations.map((c) => [c.conversationId, c]));
  for (const c of convs.conversations) titleOf(c); // learns the peers' names
  drawRequests();
  drawConversations();
  await readPreviews(convs.conversations);
}

// Reads the lists again, coalescing: a burst of events costs one read running and at
// most one more queued, not one per event.
let refreshing = null;
let again = false;
export function schedule() {
  if (refreshing) {
    again = true;
    return refreshing;
  }
  refreshing = (async () => {
    try {
      do {
        again = false;
        await refresh();
      } while (again);
    } catch {
      // the next event or reconnect reads them again
    } finally {
      refreshing = null;
    }
  })();
  return refreshing;
}

function timeLabel(iso) {
  const t = el("time", "when", when(iso));
  t.title = stamp(iso);
  if (iso) t.dateTime = iso;
  return t;
}

function drawRequests() {
  const list = $("requests");
  list.replaceChildren();
  for (const r of requests) {
    const c = byId.get(r.conversationId);
    const group = r.conversationType === "group";
    const li = el("li", "request" + (r.conversationId === openId ? " open" : ""));
    li.dataset.id = r.conversationId;
    const top = li.appendChild(el("div", "top"));
    top.appendChild(el("span", "title name", group ? (c?.name || "unnamed group") : nameOf(r.peerInboxId)));
    top.appendChild(timeLabel(r.firstSeenAt));
    const waiting = r.pendingMessages === 1 ? "1 message" : r.pendingMessages + " messages";
    const what = group
      ? "group" + (c?.memberCount ? " of " + c.memberCount : "") + " · added by " + nameOf(r.peerInboxId)
      : waiting + " waiting";
    const bottom = li.appendChild(el("div", "bottom"));
    bottom.appendChild(el("span", "preview", what));
    if (r.pendingMessages) bottom.appendChild(el("span", "badge", String(r.pendingMessages)));
    const buttons = li.appendChild(el("div", "actions"));
    for (const [label, method, kind] of [["Accept", "accept", "primary"], ["Block", "block", "danger"]]) {
      const b = button(method + " " + kind, label, async (event) => {
        event.stopPropagation();
        b.disabled = true;
        try {
          await rpc(method, { conversationId: r.conversationId });
        } finally {
          b.disabled = false;
        }
        await refresh();
        if (method === "accept") await actions.open(r.conversationId);
        else if (openId === r.conversationId) actions.close();
      });
      buttons.appendChild(b);
    }
    li.title = "Look at this request before accepting it";
    li.addEventListener("click", () => actions.openRequest(r));
    list.appendChild(li);
  }
  if (!requests.length) list.appendChild(el("li", "empty", "No requests"));
}

function drawConversations() {
  const list = $("conversations");
  list.replaceChildren();
  const shown = [...byId.values()].filter((c) => c.consent !== "requested");
  shown.sort((a, b) => activity(b) - activity(a) || (a.conversationId < b.conversationId ? 1 : -1));
  for (const c of shown) {
    const li = el("li", "conversation" + (c.conversationId === openId ? " open" : ""));
    li.dataset.id = c.conversationId;
    const top = li.appendChild(el("div", "top"));
    const title = top.appendChild(el("span", "title name", titleOf(c)));
    title.title = c.conversationType === "group" ? (c.name || "unnamed group") : (c.peerAddress || "");
    const p = previews.get(c.conversationId);
    top.appendChild(timeLabel(p?.at || c.lastMessageAt || c.createdAt));
    const bottom = li.appendChild(el("div", "bottom"));
    let text = p ? p.text : (c.conversationType === "group" ? "group" : "no messages yet");
    if (p && p.reaction) text = (p.sender === "me" ? "you" : nameOf(p.sender)) + " " + text;
    else if (p && p.sender === "me") text = "you: " + text;
    else if (p && c.conversationType === "group" && p.sender && !isMe(p.sender)) text = nameOf(p.sender) + ": " + text;
    bottom.appendChild(el("span", "preview", text.replace(/\s+/g, " ")));
    if (c.conversationType === "group") bottom.appendChild(el("span", "tag", "group"));
    if (c.consent === "blocked") bottom.appendChild(el("span", "tag consent", "blocked"));
    if (c.active === false) bottom.appendChild(el("span", "tag", "left"));
    if (c.pendingMessages) bottom.appendChild(el("span", "badge unread", String(c.pendingMessages)));
    if (c.consent === "blocked") {
      li.appendChild(el("div", "actions")).appendChild(button("unblock", "Unblock", async (event) => {
        event.stopPropagation();
        await rpc("unblock", { conversationId: c.conversationId });
        await refresh();
      }));
    } else {
      li.addEventListener("click", () => actions.open(c.conversationId));
    }
    list.appendChild(li);
  }
  if (!shown.length) list.appendChild(el("li", "empty", "No conversations yet"));
}

export function drawOutbox(outbox) {
  const list = $("outbox-list");
  list.replaceChildren();
  for (const o of outbox) {
    const c = byId.get(o.conversationId);
    const why = o.lastReason ? " (" + o.lastReason + ")" : "";
    const li = el("li", "outbox " + o.state, o.state + why + " · " + (c ? titleOf(c) : "conversation") + " · " + o.attempts + " attempts");
    li.dataset.key = o.key;
    li.appendChild(el("div", "muted", "key " + o.key));
    if (o.lastError) li.appendChild(el("div", "error reason", o.lastError));
    if (o.nextAttemptAt) {
      const next = li.appendChild(el("div", "muted", "next attempt " + when(o.nextAttemptAt)));
      next.title = stamp(o.nextAttemptAt);
    }
    list.appendChild(li);
  }
  if (!outbox.length) list.appendChild(el("li", "empty", "Nothing waiting"));
}

export { shortAddress };

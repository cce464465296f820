// cone's web console: plain DOM in a few ES modules, no build step, nothing vendored
// (docs/web.md). This module signs in, draws the lists and the status, follows the
// event stream and wires the others: api.js (calls), render.js (safe rendering),
// history.js (a conversation's messages and reactions), composer.js (sends) and
// groups.js (group create, members, name).
import { AuthError, follow, forgetToken, rpc, token } from "./api.js";
import * as composer from "./composer.js";
import * as groups from "./groups.js";
import { clear, live, loadPage, state } from "./history.js";
import { button, el, setName, shortId } from "./render.js";

const CONSUMER = "console";
const $ = (id) => document.getElementById(id);
let conversationsById = new Map();
let requestCount = null; // how many requests the list shows

function signedOut(message) {
  forgetToken();
  $("app").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
}

// ---- lists ---------------------------------------------------------------------
function title(c) {
  return c.contactName || c.name || c.peerAddress || shortId(c.peerInboxId || c.conversationId);
}

async function refreshLists() {
  const [reqs, convs] = await Promise.all([
    rpc("requests"),
    rpc("conversations", { consumer: CONSUMER, limit: 200 }),
  ]);
  const requests = $("requests");
  requests.replaceChildren();
  for (const r of reqs.requests) {
    const li = setName(el("li", "request"), r.peerAddress || shortId(r.peerInboxId));
    li.dataset.id = r.conversationId;
    li.appendChild(el("span", "badge", String(r.pendingMessages)));
    li.appendChild(document.createElement("br"));
    for (const [label, method] of [["Accept", "accept"], ["Block", "block"]]) {
      const b = button(method, label, async () => {
        b.disabled = true;
        await rpc(method, { conversationId: r.conversationId });
        await refreshLists();
        if (method === "accept") await openConversation(r.conversationId);
      });
      li.appendChild(b);
    }
    requests.appendChild(li);
  }
  if (!reqs.requests.length) requests.appendChild(el("li", "muted", "none"));
  requestCount = reqs.requests.length;
  conversationsById = new Map(convs.conversations.map((c) => [c.conversationId, c]));
  const list = $("conversations");
  list.replaceChildren();
  for (const c of convs.conversations.filter((c) => c.consent !== "requested")) {
    const li = setName(el("li", "conversation" + (c.conversationId === state.open ? " open" : "")), title(c));
    li.dataset.id = c.conversationId;
    if (c.conversationType === "group") li.appendChild(el("span", "consent", "group"));
    li.appendChild(el("span", "consent", c.consent));
    if (c.pendingMessages) li.appendChild(el("span", "badge unread", String(c.pendingMessages)));
    if (c.consent === "blocked") {
      li.appendChild(button("unblock", "Unblock", async (event) => {
        event.stopPropagation();
        await rpc("unblock", { conversationId: c.conversationId });
        await refreshLists();
      }));
    } else {
      li.addEventListener("click", () => openConversation(c.conversationId));
    }
    list.appendChild(li);
  }
}

// Reads the lists again, coalescing: a burst of events costs one read running and at
// most one more queued, not one per event.
let refreshing = null;
let again = false;
function scheduleRefresh() {
  if (refreshing) {
    again = true;
    return refreshing;
  }
  refreshing = (async () => {
    try {
      do {
        again = false;
        await refreshLists();
      } while (again);
    } catch {
      // the next event or reconnect reads them again
    } finally {
      refreshing = null;
    }
  })();
  return refreshing;
}

async function acknowledge(messages) {
  const ids = messages.filter((m) => !m.own && m.sequence && m.sequence !== "0").map((m) => m.messageId);
  if (ids.length) await rpc("ack", { consumer: CONSUMER, messageIds: ids.slice(0, 1000) });
}

async function openConversation(conversationId, name) {
  clear(conversationId);
  let c = conversationsById.get(conversationId);
  if (!c) {
    await refreshLists();
    c = conversationsById.get(conversationId);
  }
  setName($("chat-title"), name || (c ? title(c) : shortId(conversationId)));
  $("composer").hidden = false;
  composer.reset();
  await groups.showGroup(c, state.me);
  await acknowledge(await loadPage(conversationId));
  await refreshLists();
}

// ---- status: network, streams, outbox failures, healed gaps --------------------
function pill(id, text, ok) {
  const node = $(id);
  node.textContent = text;
  node.classList.toggle("ok", ok === true);
  node.classList.toggle("bad", ok === false);
}

async function refreshStatus() {
  const s = await rpc("status");
  const network = s.networkState || "unknown";
  pill("network", "network: " + network, network === "reachable");
  const streams = s.streams || [];
  const up = streams.filter((x) => x.connected).length;
  pill("streams", "streams: " + up + "/" + streams.length, streams.length > 0 && up === streams.length);
  const outbox = s.outbox || [];
  const failing = outbox.filter((o) => o.state === "failing").length;
  pill("outbox", "outbox: " + outbox.length + (failing ? " (" + failing + " failing)" : ""), failing === 0);
  pill("healed", "healed: " + (s.ingestHealed || 0));
  // A request that came without a message (a group's welcome) moves no inbox event:
  // the status read every 5 s counts requests, and a new count reads the lists again.
  if (requestCount !== null && (s.requests || 0) !== requestCount) scheduleRefresh();
  const list = $("outbox-list");
  list.replaceChildren();
  for (const o of outbox) {
    const why = o.lastReason ? " (" + o.lastReason + ")" : "";
    const li = el("li", "outbox " + o.state, o.state + why + " · " + shortId(o.conversationId) + " · " + o.attempts + " attempts");
    li.dataset.key = o.key;
    li.appendChild(el("div", "muted", "key " + o.key));
    if (o.lastError) li.appendChild(el("div", "error reason", o.lastError));
    if (o.nextAttemptAt) li.appendChild(el("div", "muted", "next attempt " + o.nextAttemptAt));
    list.appendChild(li);
  }
  if (!outbox.length) list.appendChild(el("li", "muted", "nothing waiting"));
}

// ---- the event stream ----------------------------------------------------------
// `message`: a message of an accepted conversation (appended when it is open);
// `inbox`: the inbox moved without a message for this consumer (a request came, or
// messages another way acknowledged): the lists are read again.
async function onEvent(kind, data) {
  if (kind === "message") {
    if (data.conversationId === state.open) {
      live(data);
      await acknowledge([data]);
    }
    scheduleRefresh();
  } else if (kind === "inbox") {
    scheduleRefresh();
  }
}

// ---- start ---------------------------------------------------------------------
async function start() {
  if (!token) return signedOut();
  let me;
  try {
    me = await rpc("identity");
  } catch (err) {
    return signedOut(err instanceof AuthError ? err.message : "the daemon does not answer: " + err.message);
  }
  state.me = me.inboxId;
  $("login").hidden = true;
  $("app").hidden = false;
  $("identity").textContent = me.address + " · inbox " + shortId(me.inboxId) + " · " + me.network;
  composer.setup();
  groups.setupCreate(openConversation);
  groups.setupPanel(me.inboxId, refreshLists);
  $("older").addEventListener("click", async () => {
    $("older").disabled = true;
    try {
      const conversationId = state.open;
      await acknowledge(await loadPage(conversationId));
    } finally {
      $("older").disabled = false;
    }
  });
  await Promise.all([refreshLists(), refreshStatus()]);
  setInterval(() => refreshStatus().catch(() => pill("network", "network: no answer", false)), 5000);
  document.body.dataset.ready = "1";
  try {
    await follow(CONSUMER, onEvent, (live) => {
      pill("live", live ? "events: live" : "events: reconnecting", live);
      if (live) scheduleRefresh();
    });
  } catch (err) {
    signedOut(err.message);
  }
}

start();

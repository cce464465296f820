// cone's web console: plain DOM in a few ES modules, no build step, nothing vendored
// (docs/web.md). This module signs in and wires the others: api.js (calls),
// people.js (names and times), render.js (safe rendering), lists.js (the side bar),
// history.js (a conversation's messages and reactions), request.js (a request looked
// at before accepting), composer.js (sends) and groups.js (groups).
import { AuthError, follow, forgetToken, rpc, token, tokenFromAddress, tokenFromField } from "./api.js";
import * as composer from "./composer.js";
import * as groups from "./groups.js";
import { clear, live, loadPage, state } from "./history.js";
import * as lists from "./lists.js";
import { learn, setMe, shortAddress, titleOf } from "./people.js";
import { setName } from "./render.js";
import { showRequest } from "./request.js";

const CONSUMER = "console";
const $ = (id) => document.getElementById(id);

function signedOut(message) {
  forgetToken();
  $("app").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  document.body.dataset.signedIn = "";
}

async function acknowledge(messages) {
  const ids = messages.filter((m) => !m.own && m.sequence && m.sequence !== "0").map((m) => m.messageId);
  if (ids.length) await rpc("ack", { consumer: CONSUMER, messageIds: ids.slice(0, 1000) });
}

function showChat(mode) {
  for (const id of ["composer", "older"]) if (mode !== "chat") $(id).hidden = true;
  $("request-panel").hidden = mode !== "request";
  $("history").hidden = mode === "request";
}

async function openConversation(conversationId, name) {
  clear(conversationId);
  lists.markOpen(conversationId);
  showChat("chat");
  let c = lists.conversation(conversationId);
  if (!c) {
    await lists.refresh();
    c = lists.conversation(conversationId);
  }
  setName($("chat-title"), name || (c ? titleOf(c) : "conversation"));
  $("chat-sub").textContent = c ? lists.subtitle(c) : "";
  $("composer").hidden = false;
  composer.reset();
  await groups.showGroup(c, state.me);
  await acknowledge(await loadPage(conversationId));
  await lists.refresh();
}

// Nothing open (a request just blocked).
function closeChat() {
  clear(null);
  lists.markOpen(null);
  $("chat-title").textContent = "Pick a conversation";
  $("chat-sub").textContent = "";
  showChat("none");
  groups.showGroup(null, state.me);
}

async function openRequest(request) {
  clear(null);
  lists.markOpen(request.conversationId);
  showChat("request");
  await groups.showGroup(null, state.me);
  await showRequest(request, {
    accepted: async (conversationId) => {
      await lists.refresh();
      await openConversation(conversationId);
    },
    blocked: async () => {
      await lists.refresh();
      closeChat();
    },
  });
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
  pill("network", "network " + network, network === "reachable");
  const streams = s.streams || [];
  const up = streams.filter((x) => x.connected).length;
  pill("streams", "streams " + up + "/" + streams.length, streams.length > 0 && up === streams.length);
  const outbox = s.outbox || [];
  const failing = outbox.filter((o) => o.state === "failing").length;
  pill("outbox", "outbox " + outbox.length + (failing ? " (" + failing + " failing)" : ""), failing === 0);
  pill("healed", "healed " + (s.ingestHealed || 0));
  // A request that came without a message (a group's welcome) moves no inbox event:
  // the status read every 5 s counts requests, and a new count reads the lists again.
  if (lists.requestCount() !== null && (s.requests || 0) !== lists.requestCount()) lists.schedule();
  lists.drawOutbox(outbox);
}

// ---- the event stream ----------------------------------------------------------
// `message`: a message of an accepted conversation (appended when it is open; its
// conversation moves up the list with it as the preview); `inbox`: the inbox moved
// without a message for this consumer (a request came): the lists are read again.
async function onEvent(kind, data) {
  if (kind === "message") {
    lists.arrived(data);
    if (data.conversationId === state.open) {
      live(data);
      await acknowledge([data]);
    }
    lists.schedule();
  } else if (kind === "inbox") {
    lists.schedule();
  }
}

// ---- start ---------------------------------------------------------------------
let running = false; // signed in, the event stream followed
let wired = false; // the page's controls set up (once)

function wire() {
  if (wired) return;
  wired = true;
  composer.setup();
  groups.setupCreate(openConversation);
  groups.setupPanel(state.me, () => lists.refresh());
  lists.setup({ open: openConversation, openRequest, close: closeChat });
  $("older").addEventListener("click", async () => {
    $("older").disabled = true;
    try {
      await acknowledge(await loadPage(state.open));
    } finally {
      $("older").disabled = false;
    }
  });
}

async function start() {
  if (running) return;
  if (!token()) return signedOut();
  let me;
  try {
    me = await rpc("identity");
  } catch (err) {
    return signedOut(err instanceof AuthError ? err.message + ": open the login URL again" : "the daemon does not answer: " + err.message);
  }
  running = true;
  state.me = me.inboxId;
  setMe(me.inboxId, me.address);
  $("login").hidden = true;
  $("app").hidden = false;
  $("identity").textContent = shortAddress(me.address) + " · " + me.network;
  $("identity").title = me.address + " · inbox " + me.inboxId + " · " + me.network;
  wire();
  try {
    const { contacts } = await rpc("contacts");
    for (const c of contacts) learn(c.inboxId, { name: c.name, address: c.address });
  } catch {
    // names fall back to addresses
  }
  await Promise.all([lists.refresh(), refreshStatus()]);
  setInterval(() => refreshStatus().catch(() => pill("network", "network: no answer", false)), 5000);
  document.body.dataset.ready = "1";
  document.body.dataset.signedIn = "1";
  try {
    await follow(CONSUMER, onEvent, (up) => {
      pill("live", up ? "events live" : "events reconnecting", up);
      if (up) lists.schedule();
    });
  } catch (err) {
    running = false;
    signedOut(err.message);
  }
}

// The sign-in page: the login URL pasted into the address bar (only the fragment
// changes: no reload) or into the field.
window.addEventListener("hashchange", () => {
  if (tokenFromAddress()) start();
});
$("signin").addEventListener("submit", (event) => {
  event.preventDefault();
  if (!tokenFromField($("signin-token").value)) {
    $("login-error").textContent = "paste the login URL cone printed, or the token in http.token";
    return;
  }
  $("signin-token").value = "";
  start();
});
start();

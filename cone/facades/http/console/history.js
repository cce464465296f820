// One conversation's history: its messages (the newest page first, older pages on
// demand with `before`), replies quoted, reactions gathered under the message they
// react to, and a react button per message that adds or removes the operator's own.
import { Keyed, rpc } from "./api.js";
import { arrived } from "./lists.js";
import { fullName, nameOf, stamp, when } from "./people.js";
import { appendText, attachmentLink, button, el, markdown, plainType, shortType, summary } from "./render.js";

export const REACTION = "👍";
// Messages per page: 200, or ?page=N (1–1000) in the console's URL.
const PAGE = Math.min(Math.max(Number(new URLSearchParams(location.search).get("page")) || 200, 1), 1000);

const $ = (id) => document.getElementById(id);

export const state = {
  open: null, // the open conversation's id
  me: null, // this identity's inbox id
  oldest: null, // the oldest message id shown, for the next older page
  floor: null, // the newest page's highest inbox sequence, once it is loaded
  early: [], // live messages that came while the newest page was loading
};
const shown = new Map(); // messageId -> its <li> (null for a reaction)
const texts = new Map(); // messageId -> a short text, for reply quotes
const reactions = new Map(); // messageId -> Map(emoji -> Set(sender inbox id))
const reacting = new Map(); // messageId + action -> Keyed (one logical reaction each)

function sender(m) {
  return m.own ? state.me : m.senderInboxId;
}

function renderMessage(m) {
  const li = el("li", m.own ? "own" : "");
  li.dataset.id = m.messageId;
  const meta = li.appendChild(el("div", "meta"));
  const who = meta.appendChild(el("span", "who", m.own ? "you" : nameOf(m.senderInboxId)));
  who.title = fullName(sender(m));
  const time = meta.appendChild(el("time", "when", when(m.sentAt)));
  time.title = stamp(m.sentAt);
  if (m.sentAt) time.dateTime = m.sentAt;
  // The content type only where it is not what people read as text.
  if (!plainType(m.contentType)) meta.appendChild(el("span", "type", shortType(m.contentType)));
  if (m.replyTo) {
    const quote = texts.get(m.replyTo);
    li.appendChild(el("div", "quote", "↪ " + (quote !== undefined ? quote : "an earlier message")));
  }
  if (m.unreadable) li.appendChild(el("div", "body error", "unreadable: " + m.unreadable));
  else if (m.deleted) li.appendChild(el("div", "body muted", "deleted"));
  else if (m.contentType.startsWith("xmtp.org/markdown") && m.text !== undefined) {
    li.appendChild(markdown(m.text));
  } else if (m.text !== undefined) li.appendChild(el("div", "body", m.text));
  else if (m.data !== undefined) li.appendChild(el("pre", "body", JSON.stringify(m.data, null, 2)));
  const files = m.attachments || (m.attachment ? [m.attachment] : []);
  files.forEach((file, index) => {
    const line = li.appendChild(el("div", "body"));
    if (file.error && !file.data) appendText(line, file.filename + ": " + file.error);
    else {
      const load = async () => (await rpc("attachment", { messageId: m.messageId, index })).data;
      line.appendChild(attachmentLink(file, load));
    }
  });
  if (!m.text && !files.length && !m.data && !m.unreadable && !m.deleted) {
    li.appendChild(el("div", "body muted", m.fallback || "[" + m.contentType + "]"));
  }
  const foot = li.appendChild(el("div", "foot"));
  foot.appendChild(el("span", "reactions"));
  if (!m.deleted && !m.unreadable) {
    const b = foot.appendChild(button("react", "React " + REACTION, () => react(m.messageId)));
    b.title = "Add or remove your " + REACTION;
  }
  return li;
}

function mine(messageId, emoji) {
  return reactions.get(messageId)?.get(emoji)?.has(state.me) || false;
}

// Draws a message's reactions: each emoji with who holds it now (names up to three,
// then a count; every name on hover).
function drawReactions(messageId) {
  const li = shown.get(messageId);
  if (!li) return;
  const box = li.querySelector(".reactions");
  box.replaceChildren();
  for (const [emoji, who] of reactions.get(messageId) || []) {
    if (!who.size) continue;
    const names = [...who].map((inbox) => nameOf(inbox));
    const label = names.length <= 3 ? names.join(", ") : String(names.length);
    const mark = el("span", "reaction" + (who.has(state.me) ? " mine" : ""), emoji + " " + label);
    mark.title = names.join(", ");
    box.appendChild(mark);
  }
  li.querySelector(".react")?.classList.toggle("on", mine(messageId, REACTION));
}

function applyReaction(r, from) {
  if (!reactions.has(r.messageId)) reactions.set(r.messageId, new Map());
  const byEmoji = reactions.get(r.messageId);
  if (!byEmoji.has(r.emoji)) byEmoji.set(r.emoji, new Set());
  if (r.action === "removed") byEmoji.get(r.emoji).delete(from);
  else byEmoji.get(r.emoji).add(from);
  drawReactions(r.messageId);
}

// The react button: adds the operator's reaction, or removes it when already there.
// Each logical reaction (message, add or remove) has its own key until it succeeds.
async function react(messageId) {
  const action = mine(messageId, REACTION) ? "removed" : "added";
  const id = messageId + ":" + action;
  if (!reacting.has(id)) reacting.set(id, new Keyed());
  const keyed = reacting.get(id);
  const b = shown.get(messageId)?.querySelector(".react");
  if (b) b.disabled = true;
  try {
    const conversationId = state.open;
    const reaction = { messageId, emoji: REACTION, action };
    const result = await keyed.run((key) => rpc("reply", { conversationId, reaction, key }));
    if (result) {
      reacting.delete(id);
      if (conversationId === state.open) {
        const sent = {
          messageId: result.messageId, own: true, contentType: "xmtp.org/reaction:2.0",
          reaction, conversationId, sentAt: new Date().toISOString(),
        };
        show(sent);
        arrived(sent);
      }
    }
  } catch (err) {
    $("send-state").textContent = "reaction not sent: " + err.message + " (press again to retry)";
  } finally {
    if (b) b.disabled = false;
  }
}

// Shows a message at the end of the history (or into `into`, for an older page).
export function show(m, into) {
  if (shown.has(m.messageId)) return;
  if (m.reaction) {
    shown.set(m.messageId, null);
    applyReaction(m.reaction, sender(m));
    return;
  }
  texts.set(m.messageId, summary(m).slice(0, 80));
  const li = renderMessage(m);
  shown.set(m.messageId, li);
  if (into) {
    into.appendChild(li);
  } else {
    const history = $("history");
    const atEnd = history.scrollTop + history.clientHeight >= history.scrollHeight - 40;
    history.appendChild(li);
    // The operator's own message is always brought into view; another's only when the
    // view was at the end (not while reading older ones).
    if (atEnd || m.own) history.scrollTop = history.scrollHeight;
  }
  drawReactions(m.messageId);
}

export function clear(conversationId) {
  state.open = conversationId;
  state.oldest = null;
  state.floor = null;
  state.early = [];
  shown.clear();
  texts.clear();
  reactions.clear();
  reacting.clear();
  $("history").replaceChildren();
  $("older").hidden = true;
}

// Loads the newest page (no `before`), or the page before the oldest one shown.
export async function loadPage(conversationId) {
  const params = { conversationId, limit: PAGE };
  if (state.oldest) params.before = state.oldest;
  const page = await rpc("messages", params);
  if (conversationId !== state.open) return [];
  const messages = page.messages.slice().reverse(); // oldest first
  if (messages.length) state.oldest = messages[0].messageId;
  if (params.before) {
    const history = $("history");
    const height = history.scrollHeight;
    const older = document.createDocumentFragment();
    messages.forEach((m) => show(m, older));
    history.insertBefore(older, history.firstChild);
    history.scrollTop += history.scrollHeight - height; // keep the view where it was
  } else {
    messages.forEach((m) => show(m));
    $("history").scrollTop = $("history").scrollHeight; // the newest at the bottom, in view
    state.floor = Math.max(0, ...messages.map((m) => Number(m.sequence) || 0));
    const early = state.early;
    state.early = [];
    early.forEach(live);
  }
  $("older").hidden = !page.more;
  return messages;
}

// A message of the open conversation from the event stream: appended when newer than
// the newest page (an older one is there already, or comes with "Load older").
export function live(m) {
  if (state.floor === null) state.early.push(m);
  else if (Number(m.sequence) > state.floor) show(m);
}

// A request looked at before accepting it: who it is from, a group's name and members,
// and its first message (`requestPreview`), shown as inert text: never rendered as
// markdown, no link, a file by its name only. Looking delivers nothing: the message
// reaches no consumer (the agent included) until the request is accepted (docs/web.md).
import { rpc } from "./api.js";
import { fullName, learn, nameOf, stamp, when } from "./people.js";
import { appendText, button, el, plainType, setName, shortType, summary } from "./render.js";

const $ = (id) => document.getElementById(id);
let showing = null; // the request shown

function row(dl, label, value, title) {
  dl.appendChild(el("dt", null, label));
  const dd = dl.appendChild(el("dd", null, value));
  if (title) dd.title = title;
  return dd;
}

// The first message as inert text: its text (markdown as its source), or what it is.
function inert(m) {
  const box = el("div", "first");
  const meta = box.appendChild(el("div", "meta"));
  meta.appendChild(el("span", "who", nameOf(m.senderInboxId)));
  const t = meta.appendChild(el("time", "when", when(m.sentAt)));
  t.title = stamp(m.sentAt);
  if (!plainType(m.contentType)) meta.appendChild(el("span", "type", shortType(m.contentType)));
  const body = box.appendChild(el("div", "body inert"));
  if (m.text !== undefined) appendText(body, m.text);
  else appendText(body, "[" + summary(m) + "]");
  return box;
}

// `done.accepted(conversationId)` and `done.blocked()` follow a decision.
export async function showRequest(r, done) {
  showing = r.conversationId;
  const group = r.conversationType === "group";
  const panel = $("request-panel");
  panel.replaceChildren();
  if (group) $("chat-title").textContent = "Group request";
  else setName($("chat-title"), nameOf(r.peerInboxId), "Request from ");
  $("chat-sub").textContent = group ? "" : r.peerAddress || "";
  const [preview, conversations, members] = await Promise.all([
    rpc("requestPreview", { conversationId: r.conversationId }),
    group ? rpc("conversations", { consent: "requested", type: "group", limit: 200 }) : null,
    group ? rpc("members", { conversationId: r.conversationId }).catch(() => null) : null,
  ]);
  if (showing !== r.conversationId) return;
  const req = preview.request;
  learn(req.peerInboxId, { address: req.peerAddress });
  panel.appendChild(el("p", "notice",
    "Nothing from this conversation reaches the agent or any other consumer until you accept it. " +
    "Its first message is shown as plain text: no link, markup or file is opened."));
  const dl = panel.appendChild(el("dl", "facts"));
  let from;
  if (group) {
    const c = conversations?.conversations.find((x) => x.conversationId === r.conversationId);
    setName($("chat-title"), c?.name || "unnamed group", "Group request: ");
    $("chat-sub").textContent = "added by " + nameOf(req.peerInboxId);
    row(dl, "Group", c?.name || "unnamed group");
    from = row(dl, "Added by", nameOf(req.peerInboxId));
  } else {
    from = row(dl, "From", nameOf(req.peerInboxId));
  }
  // Who exactly: the address and the inbox id, under the name.
  if (req.peerAddress) from.appendChild(el("span", "id", req.peerAddress));
  from.appendChild(el("span", "id", "inbox " + req.peerInboxId));
  row(dl, "First seen", when(req.firstSeenAt), stamp(req.firstSeenAt));
  row(dl, "Waiting", req.pendingMessages === 1 ? "1 message" : req.pendingMessages + " messages");
  if (group && members) {
    for (const m of members.members) learn(m.inboxId, { address: m.addresses?.[0] });
    const dd = row(dl, "Members", "");
    const ul = dd.appendChild(el("ul", "people"));
    for (const m of members.members) {
      const li = ul.appendChild(el("li", null, nameOf(m.inboxId)));
      li.title = fullName(m.inboxId);
    }
  }
  panel.appendChild(el("h3", null, "First message"));
  panel.appendChild(preview.firstMessage ? inert(preview.firstMessage) : el("p", "muted", "No message yet."));
  const actions = panel.appendChild(el("div", "actions"));
  const accept = actions.appendChild(button("accept primary", "Accept", async () => {
    accept.disabled = true;
    await rpc("accept", { conversationId: r.conversationId });
    await done.accepted(r.conversationId);
  }));
  const block = actions.appendChild(button("block danger", "Block", async () => {
    block.disabled = true;
    await rpc("block", { conversationId: r.conversationId });
    await done.blocked();
  }));
}

// Groups: create one (members by address or inbox id, keyed like a send, so a double
// click or a retry makes one group), and for the open group its name and members, to
// rename, add and remove.
import { Keyed, rpc } from "./api.js";
import { fullName, learn, nameOf } from "./people.js";
import { button, el, setName } from "./render.js";

const $ = (id) => document.getElementById(id);
const creating = new Keyed();
let group = null; // the open group's conversation id

function members(raw) {
  return raw.split(/[\s,;]+/).map((s) => s.trim()).filter(Boolean);
}

function say(id, text) {
  $(id).textContent = text;
}

// `opened(conversationId, title)` opens the new group in the console.
export function setupCreate(opened) {
  $("new-group").addEventListener("click", () => {
    $("group-form").hidden = !$("group-form").hidden;
  });
  $("group-create").addEventListener("click", async () => {
    const list = members($("group-members").value);
    if (!list.length) return say("group-form-state", "give at least one member");
    const name = $("group-name").value.trim();
    $("group-create").disabled = true;
    say("group-form-state", "creating…");
    try {
      const params = { members: list, key: null };
      if (name) params.name = name;
      const result = await creating.run((key) => rpc("createGroup", { ...params, key }));
      if (!result) return;
      say("group-form-state", result.deduplicated ? "already made" : "created");
      $("group-members").value = "";
      $("group-name").value = "";
      $("group-form").hidden = true;
      await opened(result.group.conversationId, result.group.name || "group");
    } catch (err) {
      say("group-form-state", "not created: " + err.message + " (Create retries)");
    } finally {
      $("group-create").disabled = false;
    }
  });
  // Other members or another name: another group, so another key.
  for (const id of ["group-members", "group-name"]) {
    $(id).addEventListener("input", () => creating.reset());
  }
}

// Shows the panel of the open conversation when it is a group (hides it otherwise).
export async function showGroup(conversation, me) {
  const panel = $("group-panel");
  group = conversation && conversation.conversationType === "group" ? conversation.conversationId : null;
  panel.hidden = !group;
  if (!group) return;
  $("group-rename").value = conversation.name || "";
  say("group-state", "");
  await drawMembers(group, me);
}

async function drawMembers(conversationId, me) {
  const answer = await rpc("members", { conversationId });
  if (conversationId !== group) return;
  drawList(answer.members, me);
}

function drawList(list, me) {
  const ul = $("members");
  ul.replaceChildren();
  for (const m of list) learn(m.inboxId, { address: m.addresses && m.addresses[0] });
  for (const m of list) {
    const li = el("li", "member");
    li.dataset.inbox = m.inboxId;
    li.title = fullName(m.inboxId);
    li.appendChild(el("span", "title name", nameOf(m.inboxId)));
    if (m.role !== "member") li.appendChild(el("span", "tag", m.role.replace("_", " ")));
    if (m.inboxId !== me) li.appendChild(button("remove small", "Remove", () => change("removeMembers", [m.inboxId], me)));
    ul.appendChild(li);
  }
}

async function change(method, list, me) {
  const conversationId = group;
  say("group-state", method === "addMembers" ? "adding…" : "removing…");
  try {
    const answer = await rpc(method, { conversationId, members: list });
    if (conversationId !== group) return;
    drawList(answer.members, me);
    say("group-state", method === "addMembers" ? "added" : "removed");
    if (method === "addMembers") $("member-add").value = "";
  } catch (err) {
    say("group-state", "not changed: " + err.message);
  }
}

// `renamed()` refreshes the lists after a rename.
export function setupPanel(me, renamed) {
  $("member-add-button").addEventListener("click", () => {
    const list = members($("member-add").value);
    if (list.length && group) change("addMembers", list, me);
  });
  $("group-rename-button").addEventListener("click", async () => {
    const name = $("group-rename").value.trim();
    if (!group || !name) return;
    say("group-state", "renaming…");
    try {
      const answer = await rpc("updateGroup", { conversationId: group, name });
      say("group-state", "renamed");
      setName($("chat-title"), answer.group?.name || name);
      await renamed();
    } catch (err) {
      say("group-state", "not renamed: " + err.message);
    }
  });
}

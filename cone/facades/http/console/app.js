// cone's web console: plain DOM, no build step, nothing vendored (docs/web.md).
//
// Every call goes to /api/v1/rpc or /api/v1/events with the bearer token, which the
// login URL carries in its fragment (#token=...) and this tab keeps in sessionStorage.
// Peer content is inserted as text only (textContent, createTextNode); markdown is
// rendered by the small allow-list renderer below, which builds DOM nodes and never
// parses HTML; links are http(s) only and open without an opener.
"use strict";

(() => {
  const CONSUMER = "console";
  const TOKEN_KEY = "cone.token";
  const $ = (id) => document.getElementById(id);

  // ---- token ---------------------------------------------------------------------
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get("token")) {
    sessionStorage.setItem(TOKEN_KEY, fragment.get("token"));
    history.replaceState(null, "", location.pathname); // the token leaves the address bar
  }
  const token = sessionStorage.getItem(TOKEN_KEY);

  class AuthError extends Error {}

  function signedOut(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    $("app").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message || "";
  }

  let rpcId = 0;
  async function rpc(method, params) {
    const response = await fetch("/api/v1/rpc", {
      method: "POST",
      headers: { "Authorization": "Bearer " + token, "Content-Type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: ++rpcId, method, params: params || {} }),
      cache: "no-store",
      credentials: "omit",
    });
    if (response.status === 401) throw new AuthError("the token was refused");
    if (!response.ok) throw new Error("HTTP " + response.status);
    const answer = await response.json();
    if (answer.error) throw new Error(answer.error.message);
    return answer.result;
  }

  // ---- safe rendering ------------------------------------------------------------
  // Bidirectional controls and other invisible format characters are shown as visible
  // marks instead of being obeyed, so a peer cannot reorder what the operator reads.
  const CONTROLS = /[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) appendText(node, text);
    return node;
  }

  function appendText(parent, text) {
    let last = 0;
    for (const match of String(text).matchAll(CONTROLS)) {
      parent.appendChild(document.createTextNode(text.slice(last, match.index)));
      const code = match[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
      parent.appendChild(el("span", "ctl", "[U+" + code + "]"));
      last = match.index + match[0].length;
    }
    parent.appendChild(document.createTextNode(String(text).slice(last)));
    return parent;
  }

  function safeHref(raw) {
    try {
      const url = new URL(raw);
      return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
    } catch {
      return null;
    }
  }

  function link(text, href) {
    const a = el("a", null, text);
    a.href = href;
    a.rel = "noopener noreferrer";
    a.target = "_blank";
    return a;
  }

  // Inline markdown: `code`, **strong**, *em* / _em_, [text](http(s) url). Anything
  // else, and any link that is not http(s), stays literal text.
  const INLINE = /`([^`]+)`|\*\*([^*]+)\*\*|\*([^*]+)\*|_([^_]+)_|\[([^\]]+)\]\(([^)\s]+)\)/g;

  function inline(parent, text) {
    let last = 0;
    for (const m of text.matchAll(INLINE)) {
      appendText(parent, text.slice(last, m.index));
      if (m[1] !== undefined) parent.appendChild(el("code", null, m[1]));
      else if (m[2] !== undefined) inline(parent.appendChild(el("strong")), m[2]);
      else if (m[3] !== undefined) inline(parent.appendChild(el("em")), m[3]);
      else if (m[4] !== undefined) inline(parent.appendChild(el("em")), m[4]);
      else {
        const href = safeHref(m[6]);
        if (href) parent.appendChild(link(m[5], href));
        else appendText(parent, m[0]);
      }
      last = m.index + m[0].length;
    }
    appendText(parent, text.slice(last));
  }

  // Block markdown: ``` fences, # headings, - / * / 1. lists, > quotes, paragraphs.
  function markdown(source) {
    const root = el("div", "body md");
    const lines = source.split(/\r?\n/);
    let list = null;
    let para = [];
    const flush = () => {
      if (para.length) inline(root.appendChild(el("p")), para.join(" "));
      para = [];
    };
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      if (line.startsWith("```")) {
        flush();
        list = null;
        const code = [];
        for (i++; i < lines.length && !lines[i].startsWith("```"); i++) code.push(lines[i]);
        root.appendChild(el("pre")).appendChild(el("code", null, code.join("\n")));
        continue;
      }
      const heading = /^(#{1,6})\s+(.*)$/.exec(line);
      const item = /^\s*(?:[-*]|\d+\.)\s+(.*)$/.exec(line);
      const quote = /^>\s?(.*)$/.exec(line);
      if (heading) {
        flush();
        list = null;
        inline(root.appendChild(el("h" + Math.min(heading[1].length + 2, 6))), heading[2]);
      } else if (item) {
        flush();
        if (!list) list = root.appendChild(el("ul"));
        inline(list.appendChild(el("li")), item[1]);
      } else if (quote) {
        flush();
        list = null;
        inline(root.appendChild(el("blockquote")), quote[1]);
      } else if (!line.trim()) {
        flush();
        list = null;
      } else {
        list = null;
        para.push(line);
      }
    }
    flush();
    return root;
  }

  // ---- state ---------------------------------------------------------------------
  let me = null;
  let open = null; // the open conversation's id
  const shown = new Map(); // messageId -> its <li> in the open history
  const texts = new Map(); // messageId -> a short text, for reply quotes

  function shortId(id) {
    return id ? id.slice(0, 8) + "…" : "?";
  }

  function summary(m) {
    if (m.text !== undefined) return m.text;
    if (m.attachment) return "[file " + m.attachment.filename + "]";
    if (m.reaction) return m.reaction.emoji;
    return m.fallback || "[" + m.contentType + "]";
  }

  function base64Bytes(data) {
    const raw = atob(data);
    const bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    return bytes;
  }

  // An attachment is only ever downloaded: a Blob typed application/octet-stream (the
  // browser never renders or sniffs it), saved under its name.
  function attachmentLink(m, file, index) {
    const a = el("a", "file", "⬇ " + file.filename + (file.size ? " (" + file.size + " B)" : ""));
    a.href = "#";
    a.addEventListener("click", async (event) => {
      event.preventDefault();
      let data = file.data;
      if (!data) data = (await rpc("attachment", { messageId: m.messageId, index })).data;
      const blob = new Blob([base64Bytes(data)], { type: "application/octet-stream" });
      const save = document.createElement("a");
      save.href = URL.createObjectURL(blob);
      save.download = file.filename.replace(/[\\/]/g, "_") || "attachment";
      save.rel = "noopener";
      save.click();
      setTimeout(() => URL.revokeObjectURL(save.href), 10000);
    });
    return a;
  }

  function renderMessage(m) {
    const li = el("li", m.own ? "own" : "");
    li.dataset.id = m.messageId;
    const who = m.own ? "me" : shortId(m.senderInboxId);
    li.appendChild(el("div", "meta", who + " · " + (m.sentAt || "") + " · " + m.contentType));
    if (m.replyTo) {
      const quote = texts.get(m.replyTo);
      li.appendChild(el("div", "quote", "↪ " + (quote !== undefined ? quote : shortId(m.replyTo))));
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
      else line.appendChild(attachmentLink(m, file, index));
    });
    if (!m.text && !files.length && !m.data && !m.unreadable && !m.deleted) {
      li.appendChild(el("div", "body muted", m.fallback || "[" + m.contentType + "]"));
    }
    li.appendChild(el("div", "reactions"));
    return li;
  }

  function addReaction(r) {
    const target = shown.get(r.messageId);
    if (!target) return false;
    const box = target.querySelector(".reactions");
    const mark = el("span", "reaction", (r.action === "removed" ? "−" : "") + r.emoji + " ");
    box.appendChild(mark);
    return true;
  }

  function show(m) {
    if (shown.has(m.messageId)) return;
    if (m.reaction && addReaction(m.reaction)) {
      shown.set(m.messageId, null);
      return;
    }
    texts.set(m.messageId, summary(m).slice(0, 80));
    const li = renderMessage(m);
    shown.set(m.messageId, li);
    const history = $("history");
    const atEnd = history.scrollTop + history.clientHeight >= history.scrollHeight - 40;
    history.appendChild(li);
    if (atEnd) li.scrollIntoView({ block: "end" });
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
      const li = el("li", "request", r.peerAddress || shortId(r.peerInboxId));
      li.dataset.id = r.conversationId;
      li.appendChild(el("span", "badge", String(r.pendingMessages)));
      li.appendChild(document.createElement("br"));
      for (const [label, method] of [["Accept", "accept"], ["Block", "block"]]) {
        const b = el("button", method, label);
        b.type = "button";
        b.addEventListener("click", async () => {
          b.disabled = true;
          await rpc(method, { conversationId: r.conversationId });
          await refreshLists();
          if (method === "accept") await openConversation(r.conversationId, r.peerAddress);
        });
        li.appendChild(b);
      }
      requests.appendChild(li);
    }
    if (!reqs.requests.length) requests.appendChild(el("li", "muted", "none"));
    const list = $("conversations");
    list.replaceChildren();
    for (const c of convs.conversations.filter((c) => c.consent !== "requested")) {
      const li = el("li", "conversation" + (c.conversationId === open ? " open" : ""), title(c));
      li.dataset.id = c.conversationId;
      li.appendChild(el("span", "consent", c.consent));
      if (c.pendingMessages) li.appendChild(el("span", "badge unread", String(c.pendingMessages)));
      if (c.consent === "blocked") {
        const b = el("button", "unblock", "Unblock");
        b.type = "button";
        b.addEventListener("click", async (event) => {
          event.stopPropagation();
          await rpc("unblock", { conversationId: c.conversationId });
          await refreshLists();
        });
        li.appendChild(b);
      } else {
        li.addEventListener("click", () => openConversation(c.conversationId, title(c)));
      }
      list.appendChild(li);
    }
  }

  async function acknowledge(messages) {
    const ids = messages.filter((m) => !m.own && m.sequence && m.sequence !== "0").map((m) => m.messageId);
    if (ids.length) await rpc("ack", { consumer: CONSUMER, messageIds: ids.slice(0, 1000) });
  }

  async function openConversation(conversationId, name) {
    open = conversationId;
    shown.clear();
    $("history").replaceChildren();
    $("chat-title").textContent = name || shortId(conversationId);
    $("composer").hidden = false;
    newKey();
    const page = await rpc("messages", { conversationId, limit: 200 });
    const messages = page.messages.slice().reverse();
    messages.forEach(show);
    await acknowledge(messages);
    await refreshLists();
  }

  // ---- composer: one send key per logical message --------------------------------
  let key = null;
  let sending = false;
  function newKey() {
    key = "console:" + crypto.randomUUID();
  }

  async function send() {
    const text = $("text").value;
    if (sending || !open || !text.trim()) return;
    sending = true; // a second click while this one runs sends nothing
    $("send").disabled = true;
    $("send-state").textContent = "sending…";
    try {
      // A failure keeps the key: pressing Send again retries the same logical message.
      const result = await rpc("reply", { conversationId: open, text, key });
      show({
        messageId: result.messageId, conversationId: open, own: true, text,
        contentType: "xmtp.org/text:1.0", sentAt: new Date().toISOString(),
      });
      $("text").value = "";
      $("send-state").textContent = result.published ? "sent" : "queued";
      newKey();
    } catch (err) {
      $("send-state").textContent = "not sent: " + err.message + " (Send retries)";
    } finally {
      sending = false;
      $("send").disabled = false;
    }
  }

  // ---- status and the event stream -----------------------------------------------
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
  }

  let lastEventId = null;
  async function events() {
    for (;;) {
      try {
        const query = "consumer=" + CONSUMER + "&heartbeat=5" +
          (lastEventId ? "&lastEventId=" + encodeURIComponent(lastEventId) : "");
        const response = await fetch("/api/v1/events?" + query, {
          headers: { "Authorization": "Bearer " + token },
          cache: "no-store",
          credentials: "omit",
        });
        if (response.status === 401) throw new AuthError("the token was refused");
        if (!response.ok || !response.body) throw new Error("HTTP " + response.status);
        pill("live", "events: live", true);
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            await onEvent(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
          }
        }
      } catch (err) {
        if (err instanceof AuthError) return signedOut(err.message);
      }
      pill("live", "events: reconnecting", false);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }

  async function onEvent(block) {
    let kind = "message";
    let id = null;
    let data = "";
    for (const line of block.split("\n")) {
      const colon = line.indexOf(":");
      if (colon === 0) continue; // a comment (heartbeat)
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") kind = value;
      else if (field === "id") id = value;
      else if (field === "data") data += value;
    }
    if (kind !== "message" || !data) return;
    const m = JSON.parse(data);
    if (id) lastEventId = id;
    if (m.conversationId === open) {
      show(m);
      await acknowledge([m]);
    }
    await refreshLists();
  }

  // ---- start ---------------------------------------------------------------------
  async function start() {
    if (!token) return signedOut();
    try {
      me = await rpc("identity");
    } catch (err) {
      return signedOut(err instanceof AuthError ? err.message : "the daemon does not answer: " + err.message);
    }
    $("login").hidden = true;
    $("app").hidden = false;
    $("identity").textContent = me.address + " · inbox " + shortId(me.inboxId) + " · " + me.network;
    $("send").addEventListener("click", send);
    $("text").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) send();
    });
    $("text").addEventListener("input", () => {
      if (!sending) $("send-state").textContent = "";
    });
    await Promise.all([refreshLists(), refreshStatus()]);
    setInterval(() => refreshStatus().catch(() => pill("network", "network: no answer", false)), 5000);
    setInterval(() => refreshLists().catch(() => {}), 5000);
    document.body.dataset.ready = "1";
    events();
  }

  start();
})();

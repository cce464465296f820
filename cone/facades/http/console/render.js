// Safe rendering of peer content: text is inserted as text only (textContent,
// createTextNode); markdown goes through the small allow-list renderer below, which
// builds DOM nodes and never parses HTML; links are http(s) only, opened without an
// opener. Bidi and other invisible format characters are shown, not obeyed.

const CONTROLS = /[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;

// Markdown longer than this is shown as its source text, unrendered: a hostile
// megabyte would otherwise become hundreds of thousands of DOM nodes.
export const MARKDOWN_MAX_CHARS = 64 * 1024;

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) appendText(node, text);
  return node;
}

export function button(className, label, onClick) {
  const b = el("button", className, label);
  b.type = "button";
  if (onClick) b.addEventListener("click", onClick);
  return b;
}

export function appendText(parent, text) {
  const s = String(text);
  let last = 0;
  for (const match of s.matchAll(CONTROLS)) {
    parent.appendChild(document.createTextNode(s.slice(last, match.index)));
    const code = match[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
    parent.appendChild(el("span", "ctl", "[U+" + code + "]"));
    last = match.index + match[0].length;
  }
  parent.appendChild(document.createTextNode(s.slice(last)));
  return parent;
}

// A peer-chosen string (a group's name, a title) put in `node` in place of what it
// held: marked like a message's text, and in a span of its own ("name", isolated in
// the CSS) so that nothing in it can reorder the text around it.
export function setName(node, text, prefix) {
  node.replaceChildren(el("span", "name", text));
  if (prefix) node.prepend(prefix);
  return node;
}

export function shortId(id) {
  return id ? id.slice(0, 8) + "…" : "?";
}

// `xmtp.org/attachment:1.0` -> `attachment`: a content type as a short word.
export function shortType(contentType) {
  return String(contentType || "").replace(/^xmtp\.org\//, "").replace(/:[\d.]+$/, "");
}

// Whether a message's content type is one people read as plain text (shown without a
// type label): text and markdown.
export function plainType(contentType) {
  return /^xmtp\.org\/(text|markdown):/.test(contentType || "");
}

// One line that says what a message is: its text, or what kind of thing it is.
export function summary(m) {
  if (m.deleted) return "deleted";
  if (m.unreadable) return "unreadable message";
  if (m.text !== undefined) return m.text;
  if (m.attachment) return "file " + m.attachment.filename;
  if (m.attachments?.length) return "files " + m.attachments.map((f) => f.filename).join(", ");
  if (m.reaction) return (m.reaction.action === "removed" ? "took back " : "reacted ") + m.reaction.emoji;
  if (m.data !== undefined) return "data";
  return m.fallback || shortType(m.contentType);
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
// else, and any link that is not http(s), stays literal text. Each pattern stops at
// the next character that could start another (a link's text and address hold no
// brackets), so a scan never runs past it: linear time on any input (a million
// unclosed `[` took minutes with `[^\]]+`).
const INLINE = /`([^`]+)`|\*\*([^*]+)\*\*|\*([^*]+)\*|_([^_]+)_|\[([^\][]+)\]\(([^)\s[\]]+)\)/g;

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

// Block markdown: ``` fences, # headings, lists (- * + bullets, 1. or 1) numbers,
// nested by indentation), > quotes, paragraphs.
export function markdown(source) {
  if (source.length > MARKDOWN_MAX_CHARS) return el("div", "body", source);
  const root = el("div", "body md");
  const lines = source.split(/\r?\n/);
  let lists = []; // the open lists, outermost first: { indent, ordered, node }
  let para = [];
  const flush = () => {
    if (para.length) inline(root.appendChild(el("p")), para.join(" "));
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith("```")) {
      flush();
      lists = [];
      const code = [];
      for (i++; i < lines.length && !lines[i].startsWith("```"); i++) code.push(lines[i]);
      root.appendChild(el("pre")).appendChild(el("code", null, code.join("\n")));
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const item = /^( *)([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(line);
    const quote = /^>\s?(.*)$/.exec(line);
    if (heading) {
      flush();
      lists = [];
      inline(root.appendChild(el("h" + Math.min(heading[1].length + 2, 6))), heading[2]);
    } else if (item) {
      flush();
      const indent = item[1].length;
      const ordered = /\d/.test(item[2]);
      while (lists.length && (indent < lists.at(-1).indent ||
        (indent === lists.at(-1).indent && ordered !== lists.at(-1).ordered))) lists.pop();
      const top = lists.at(-1);
      if (!top || indent > top.indent) {
        const parent = top ? top.node.lastElementChild || top.node : root;
        const node = parent.appendChild(el(ordered ? "ol" : "ul"));
        if (ordered && !top && parseInt(item[2], 10) !== 1) node.start = parseInt(item[2], 10);
        lists.push({ indent, ordered, node });
      }
      inline(lists.at(-1).node.appendChild(el("li")), item[3]);
    } else if (quote) {
      flush();
      lists = [];
      inline(root.appendChild(el("blockquote")), quote[1]);
    } else if (!line.trim()) {
      flush();
      lists = [];
    } else if (lists.length && /^\s+\S/.test(line)) {
      // a list item's continuation line
      const li = lists.at(-1).node.lastElementChild;
      li.appendChild(document.createTextNode(" "));
      inline(li, line.trim());
    } else {
      lists = [];
      para.push(line);
    }
  }
  flush();
  return root;
}

export function base64Bytes(data) {
  const raw = atob(data);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

export function bytesBase64(bytes) {
  let raw = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    raw += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(raw);
}

// An attachment is only ever downloaded: a Blob typed application/octet-stream (the
// browser never renders or sniffs it), saved under its name. `load()` gives its
// base64 bytes when the message did not carry them.
export function attachmentLink(file, load) {
  const a = el("a", "file", "⬇ " + file.filename + (file.size ? " (" + file.size + " B)" : ""));
  a.href = "#";
  a.addEventListener("click", async (event) => {
    event.preventDefault();
    const data = file.data || (await load());
    const blob = new Blob([base64Bytes(data)], { type: "application/octet-stream" });
    const save = document.createElement("a");
    save.href = URL.createObjectURL(blob);
    // No bidi control in a saved file's name either ("invoice[RLO]fdp.exe").
    save.download = file.filename.replace(/[\\/]/g, "_").replace(CONTROLS, "_") || "attachment";
    save.rel = "noopener";
    save.click();
    setTimeout(() => URL.revokeObjectURL(save.href), 10000);
  });
  return a;
}

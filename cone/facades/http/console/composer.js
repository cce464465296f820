// The composer: text or markdown (Send, or Ctrl+Enter), and files. Each logical
// message has its own send key (`console:<uuid>`): a double click sends once, and a
// failed send keeps its key, so pressing the button again retries the same message
// and never sends it twice (the key makes `reply` idempotent, docs/protocol.md).
import { Keyed, rpc } from "./api.js";
import { bytesBase64 } from "./render.js";
import { show, state } from "./history.js";
import { arrived } from "./lists.js";

// Inline attachments are at most this many bytes (the `reply` method's limit).
export const FILE_MAX_BYTES = 1000000;

const $ = (id) => document.getElementById(id);
const message = new Keyed();
const file = new Keyed();

function say(text) {
  $("send-state").textContent = text;
}

export function reset() {
  message.reset();
  file.reset();
  say("");
}

async function sendMessage() {
  const text = $("text").value;
  const asMarkdown = $("as-markdown").checked;
  const conversationId = state.open;
  if (message.running || !conversationId || !text.trim()) return;
  $("send").disabled = true;
  say("sending…");
  try {
    const result = await message.run((key) =>
      rpc("reply", asMarkdown ? { conversationId, markdown: text, key } : { conversationId, text, key }),
    );
    if (!result) return;
    const sent = {
      messageId: result.messageId, conversationId, own: true, text,
      contentType: asMarkdown ? "xmtp.org/markdown:1.0" : "xmtp.org/text:1.0",
      sentAt: new Date().toISOString(),
    };
    if (conversationId === state.open) show(sent);
    arrived(sent);
    $("text").value = "";
    say(result.published ? "sent" : "queued");
  } catch (err) {
    say("not sent: " + err.message + " (Send retries)");
  } finally {
    $("send").disabled = false;
  }
}

async function sendFile() {
  const chosen = $("file").files[0];
  const conversationId = state.open;
  if (file.running || !conversationId || !chosen) return;
  if (chosen.size > FILE_MAX_BYTES) {
    return say(chosen.name + " is " + chosen.size + " bytes: files are at most " + FILE_MAX_BYTES);
  }
  $("send-file").disabled = true;
  say("sending " + chosen.name + "…");
  try {
    const data = bytesBase64(new Uint8Array(await chosen.arrayBuffer()));
    const attachment = { filename: chosen.name, mimeType: chosen.type || "application/octet-stream", data };
    const result = await file.run((key) => rpc("reply", { conversationId, attachment, key }));
    if (!result) return;
    const sent = {
      messageId: result.messageId, conversationId, own: true,
      contentType: "xmtp.org/attachment:1.0", sentAt: new Date().toISOString(),
      attachment: { ...attachment, size: chosen.size },
    };
    if (conversationId === state.open) show(sent);
    arrived(sent);
    $("file").value = "";
    $("file-name").textContent = "";
    say(result.published ? "sent" : "queued");
  } catch (err) {
    say("not sent: " + err.message + " (Send file retries)");
  } finally {
    $("send-file").disabled = false;
  }
}

export function setup() {
  $("send").addEventListener("click", sendMessage);
  $("text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) sendMessage();
  });
  $("text").addEventListener("input", () => {
    if (!message.running) say("");
  });
  // Markdown instead of text (or back) is another kind of message: another key.
  $("as-markdown").addEventListener("change", () => message.reset());
  // Another file is another message: another key.
  $("file").addEventListener("change", () => {
    file.reset();
    $("file-name").textContent = $("file").files[0]?.name || "";
  });
  $("send-file").addEventListener("click", sendFile);
}

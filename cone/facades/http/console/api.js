// The console's only ways out: JSON-RPC calls and the event stream, both with the
// bearer token this tab keeps in sessionStorage (docs/web.md, "Signing in").

const TOKEN_KEY = "cone.token";

// A token in the address's fragment (`/#token=…`, the login URL) moves into this tab's
// sessionStorage and leaves the address bar and the history entry. Called at load and
// on every `hashchange`: a login URL pasted into a tab that already shows the page
// changes only the fragment, which reloads nothing.
export function tokenFromAddress() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const given = fragment.get("token");
  if (!given) return false;
  sessionStorage.setItem(TOKEN_KEY, given);
  history.replaceState(null, "", location.pathname + location.search); // the token leaves the address bar
  return true;
}

// What the sign-in field takes: the login URL (its `#token=`) or the token alone.
export function tokenFromField(raw) {
  const text = raw.trim();
  const at = text.indexOf("#token=");
  const given = at >= 0 ? new URLSearchParams(text.slice(at + 1)).get("token") : text;
  if (!given || /\s/.test(given)) return false;
  sessionStorage.setItem(TOKEN_KEY, given);
  return true;
}

tokenFromAddress();

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

export class AuthError extends Error {}

let rpcId = 0;

export async function rpc(method, params) {
  const response = await fetch("/api/v1/rpc", {
    method: "POST",
    headers: { "Authorization": "Bearer " + token(), "Content-Type": "application/json" },
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

// Several calls in one JSON-RPC batch (one POST): each answer's result, or an Error.
export async function rpcBatch(calls) {
  if (!calls.length) return [];
  const body = calls.map(([method, params], i) => ({ jsonrpc: "2.0", id: i, method, params: params || {} }));
  const response = await fetch("/api/v1/rpc", {
    method: "POST",
    headers: { "Authorization": "Bearer " + token(), "Content-Type": "application/json" },
    body: JSON.stringify(body),
    cache: "no-store",
    credentials: "omit",
  });
  if (response.status === 401) throw new AuthError("the token was refused");
  if (!response.ok) throw new Error("HTTP " + response.status);
  const answers = new Map((await response.json()).map((a) => [a.id, a]));
  return calls.map((_, i) => {
    const a = answers.get(i);
    return !a ? new Error("no answer") : a.error ? new Error(a.error.message) : a.result;
  });
}

// A send key: one per logical message (or group), kept across retries of it.
export function newKey() {
  return "console:" + crypto.randomUUID();
}

// Runs one logical action at most once at a time, under a key that survives a failure
// (so pressing the button again retries the same action, never a second one) and is
// replaced after a success. `run(key)` does the call; `busy` tells the caller.
export class Keyed {
  constructor() {
    this.key = newKey();
    this.running = false;
  }

  reset() {
    if (!this.running) this.key = newKey();
  }

  async run(action) {
    if (this.running) return undefined; // a second click while this one runs does nothing
    this.running = true;
    try {
      const result = await action(this.key);
      this.running = false;
      this.key = newKey();
      return result;
    } finally {
      this.running = false;
    }
  }
}

// Follows GET /api/v1/events: `onEvent(kind, data, id)` for each event, `onState(live)`
// when the stream opens or drops; reconnects after a second, resuming after the last id.
export async function follow(consumer, onEvent, onState) {
  let lastEventId = null;
  for (;;) {
    try {
      const query = "consumer=" + consumer + "&heartbeat=5" +
        (lastEventId ? "&lastEventId=" + encodeURIComponent(lastEventId) : "");
      const response = await fetch("/api/v1/events?" + query, {
        headers: { "Authorization": "Bearer " + token() },
        cache: "no-store",
        credentials: "omit",
      });
      if (response.status === 401) throw new AuthError("the token was refused");
      if (!response.ok || !response.body) throw new Error("HTTP " + response.status);
      onState(true);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const event = parse(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
          if (!event) continue;
          if (event.id) lastEventId = event.id;
          await onEvent(event.kind, event.data);
        }
      }
    } catch (err) {
      if (err instanceof AuthError) throw err;
    }
    onState(false);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

function parse(block) {
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
  return data ? { kind, id, data: JSON.parse(data) } : null;
}

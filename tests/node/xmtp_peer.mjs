// An XMTP peer on the official Node SDK (@xmtp/node-sdk, pinned in package.json), driven
// by a test: one JSON command per line on stdin, one JSON answer per line on stdout
// ({"ok": result} or {"error": message}). Bytes travel as base64 strings.
//
//   {"cmd":"start","apiUrl":URL,"dbPath":PATH[,"gatewayHost":URL]} -> {inboxId, address}
//       with gatewayHost the SDK runs in D14N mode through that gateway
//   {"cmd":"reopen","gatewayHost":URL}             -> {inboxId} a new client of the same
//       wallet on the same database, in D14N mode (what a V3 app does at the cutover:
//       node-sdk 5.5 cannot switch a running client); the old one is dropped
//   {"cmd":"dm","inboxId":ID}                      -> {conversationId}
//   {"cmd":"group","inboxIds":[ID...]}             -> {conversationId}
//   {"cmd":"send","conversationId":ID,"kind":K,"content":C} -> {messageId}
//       K: text, markdown, reaction, reply, attachment, remoteAttachment,
//          multiRemoteAttachment, transactionReference, walletSendCalls, actions, intent
//   {"cmd":"messages","conversationId":ID}         -> [{id, senderInboxId, contentType,
//                                                       content, fallback}]
//   {"cmd":"addMembers"|"removeMembers","conversationId":ID,"inboxIds":[ID...]} -> {}
//   {"cmd":"stream"}                               -> {} (streams every message from now on)
//   {"cmd":"streamed"}                             -> [text...] of others, received so far
//   {"cmd":"sendTexts","conversationIds":[ID...],"each":N} -> {seconds, cpuSeconds, latenciesMs}
//       N texts into each conversation with `sendText`, one after another in each, all
//       conversations at once (the send bench, bench/send.py); timed here, in the SDK;
//       with "loops":L, L senders at once share the conversations instead (bench/burst.py)
//   {"cmd":"answer","text":T,"loops":L}          -> {} from now on every text others send
//       (needs "stream") is answered with T in its conversation, L `sendText`s at most
//       at once: an agent on the SDK (bench/burst.py)
//   {"cmd":"encrypt","attachment":{filename,mimeType,content}} -> the encrypted attachment
//   {"cmd":"stop"}
import { createInterface } from "node:readline";
import { randomBytes } from "node:crypto";
import { secp256k1 } from "@noble/curves/secp256k1";
import { keccak_256 } from "@noble/hashes/sha3";
// CONE_NODE_SDK picks the SDK package: @xmtp/node-sdk (5.5.0, the default) or
// xmtp-node-sdk-next (the 6.1 nightly, on libxmtp 1.11).
const { ApiUrls, Client, IdentifierKind, encryptAttachment } = await import(
  process.env.CONE_NODE_SDK || "@xmtp/node-sdk"
);

let client = null;
// What `start` opened with, for `reopen`: the wallet key, the database and its key.
let opened = null;
const streamed = [];
// The "answer" command's state: the reply, how many at once, those running, those waiting.
let answering = null;

// Answer what waits, `answering.loops` at most at once.
function drain() {
  while (answering.running < answering.loops && answering.waiting.length) {
    const id = answering.waiting.shift();
    answering.running++;
    conversationOf(id)
      .then((conversation) => conversation.sendText(answering.text))
      .catch((err) => process.stderr.write(`answering failed: ${err}\n`))
      .finally(() => {
        answering.running--;
        drain();
      });
  }
}

function b64(bytes) {
  return Buffer.from(bytes).toString("base64");
}

function unb64(text) {
  return new Uint8Array(Buffer.from(text, "base64"));
}

// Any value as JSON: byte arrays as base64, bigints as decimal strings.
function plain(value) {
  if (value instanceof Uint8Array) return { base64: b64(value) };
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map(plain);
  if (value && typeof value === "object") {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = plain(v);
    return out;
  }
  return value;
}

function address(key) {
  const pub = secp256k1.getPublicKey(key, false).slice(1);
  return "0x" + Buffer.from(keccak_256(pub).slice(-20)).toString("hex");
}

function signer(key) {
  return {
    type: "EOA",
    getIdentifier: () => ({ identifier: address(key), identifierKind: IdentifierKind.Ethereum }),
    signMessage: (message) => {
      const text = Buffer.from(message, "utf8");
      const prefix = Buffer.from(`\x19Ethereum Signed Message:\n${text.length}`, "utf8");
      const digest = keccak_256(Buffer.concat([prefix, text]));
      const sig = secp256k1.sign(digest, key);
      const out = new Uint8Array(65);
      out.set(sig.toCompactRawBytes(), 0);
      out[64] = sig.recovery + 27;
      return out;
    },
  };
}

function remote(r) {
  return { ...r, secret: unb64(r.secret), salt: unb64(r.salt), nonce: unb64(r.nonce) };
}

async function send(conversation, kind, c) {
  switch (kind) {
    case "text":
      return conversation.sendText(c);
    case "markdown":
      return conversation.sendMarkdown(c);
    case "reaction":
      return conversation.sendReaction(c);
    case "reply":
      return conversation.sendReply(c);
    case "attachment":
      return conversation.sendAttachment({ ...c, content: unb64(c.content) });
    case "remoteAttachment":
      return conversation.sendRemoteAttachment(remote(c));
    case "multiRemoteAttachment":
      return conversation.sendMultiRemoteAttachment({
        attachments: c.attachments.map(remote),
      });
    case "transactionReference":
      return conversation.sendTransactionReference(c);
    case "walletSendCalls":
      return conversation.sendWalletSendCalls(c);
    case "actions":
      return conversation.sendActions(c);
    case "intent":
      return conversation.sendIntent(c);
    default:
      throw new Error(`unknown kind ${kind}`);
  }
}

async function conversationOf(id) {
  await client.conversations.sync();
  const conversation = await client.conversations.getConversationById(id);
  if (!conversation) throw new Error(`no conversation ${id}`);
  return conversation;
}

async function run(command) {
  switch (command.cmd) {
    case "start": {
      // node-sdk 5.x looks inboxes up on ApiUrls[env], whatever apiUrl says.
      ApiUrls.local = command.apiUrl;
      const key = randomBytes(32);
      opened = { key, apiUrl: command.apiUrl, dbPath: command.dbPath, dbKey: randomBytes(32) };
      client = await Client.create(signer(key), {
        env: "local",
        apiUrl: command.apiUrl,
        dbPath: command.dbPath,
        dbEncryptionKey: opened.dbKey,
        ...(command.gatewayHost ? { gatewayHost: command.gatewayHost } : {}),
      });
      return { inboxId: client.inboxId, address: address(key) };
    }
    case "reopen": {
      client = await Client.create(signer(opened.key), {
        env: "local",
        apiUrl: opened.apiUrl,
        dbPath: opened.dbPath,
        dbEncryptionKey: opened.dbKey,
        gatewayHost: command.gatewayHost,
      });
      return { inboxId: client.inboxId };
    }
    case "dm": {
      const dm = await client.conversations.createDm(command.inboxId);
      return { conversationId: dm.id };
    }
    case "group": {
      const group = await client.conversations.createGroup(command.inboxIds);
      return { conversationId: group.id };
    }
    case "send": {
      const conversation = await conversationOf(command.conversationId);
      return { messageId: await send(conversation, command.kind, command.content) };
    }
    case "messages": {
      const conversation = await conversationOf(command.conversationId);
      await conversation.sync();
      const messages = await conversation.messages();
      return messages.map((m) => ({
        id: m.id,
        senderInboxId: m.senderInboxId,
        contentType: `${m.contentType.authorityId}/${m.contentType.typeId}:${m.contentType.versionMajor}.${m.contentType.versionMinor}`,
        content: plain(m.content),
        fallback: m.fallback ?? null,
        reactions: (m.reactions ?? []).map((r) => plain(r.content)),
      }));
    }
    case "addMembers": {
      await (await conversationOf(command.conversationId)).addMembers(command.inboxIds);
      return {};
    }
    case "removeMembers": {
      await (await conversationOf(command.conversationId)).removeMembers(command.inboxIds);
      return {};
    }
    case "stream": {
      await client.conversations.streamAllMessages({
        onValue: (m) => {
          if (m.senderInboxId !== client.inboxId && typeof m.content === "string") {
            streamed.push(m.content);
            if (answering) {
              answering.waiting.push(m.conversationId);
              drain();
            }
          }
        },
      });
      return {};
    }
    case "streamed":
      return streamed;
    case "sendTexts": {
      const conversations = [];
      for (const id of command.conversationIds) conversations.push(await conversationOf(id));
      const latenciesMs = [];
      const cpu = process.cpuUsage();
      const start = performance.now();
      const sendAll = async (conversation, lane) => {
        for (let i = 0; i < command.each; i++) {
          const t = performance.now();
          await conversation.sendText(`sdk ${lane}.${i}`);
          latenciesMs.push(performance.now() - t);
        }
      };
      if (command.loops) {
        // `loops` senders share the conversations, each taking the next one left.
        let next = 0;
        const loop = async () => {
          while (next < conversations.length) {
            const lane = next++;
            await sendAll(conversations[lane], lane);
          }
        };
        await Promise.all(Array.from({ length: command.loops }, loop));
      } else {
        await Promise.all(conversations.map(sendAll));
      }
      const seconds = (performance.now() - start) / 1000;
      const used = process.cpuUsage(cpu);
      return { seconds, cpuSeconds: (used.user + used.system) / 1e6, latenciesMs };
    }
    case "answer":
      answering = { text: command.text, loops: command.loops, running: 0, waiting: [] };
      return {};
    case "encrypt": {
      const a = command.attachment;
      return plain(encryptAttachment({ ...a, content: unb64(a.content) }));
    }
    case "stop":
      process.exit(0);
    default:
      throw new Error(`unknown command ${command.cmd}`);
  }
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  let answer;
  try {
    answer = { ok: await run(JSON.parse(line)) };
  } catch (err) {
    answer = { error: String(err && err.stack ? err.stack : err) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
process.exit(0);

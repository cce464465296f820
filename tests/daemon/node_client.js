// A polyglot client: Node.js with @grpc/grpc-js loads cone's service and calls cone.sock.
// Usage: node node_client.js SOCKET PROTOSET -> prints "<inboxId> <messages received>"
// PROTOSET is the repository's proto/cone.protoset: cone.proto and every file it imports
// (buf.validate's rules included), as docs/protocol.md tells a Node.js user to load it.
const fs = require("fs");
const grpc = require("@grpc/grpc-js");
const loader = require("@grpc/proto-loader");

const [socket, protoset] = process.argv.slice(2);
const def = loader.loadFileDescriptorSetFromBuffer(fs.readFileSync(protoset), { keepCase: true, defaults: true, arrays: true });
const cone = grpc.loadPackageDefinition(def).cone.v1;
const client = new cone.ConeService(`unix:${socket}`, grpc.credentials.createInsecure());

client.Identity({}, (err, ident) => {
  if (err) { console.error(err.message); process.exit(1); }
  client.Receive({ consumer: "node", wait_ms: 0 }, (err2, batch) => {
    if (err2) { console.error(err2.message); process.exit(1); }
    console.log(ident.inbox_id, batch.messages.length);
    client.close();
  });
});

// A polyglot client: Node.js with @grpc/grpc-js loads proto/ and calls cone.sock.
// Usage: node node_client.js SOCKET PROTO_DIR  -> prints "<inboxId> <messages received>"
const grpc = require("@grpc/grpc-js");
const loader = require("@grpc/proto-loader");

const [socket, protoDir] = process.argv.slice(2);
const def = loader.loadSync("conepb/v1/cone.proto", { includeDirs: [protoDir], keepCase: false, defaults: true, arrays: true });
const cone = grpc.loadPackageDefinition(def).cone.v1;
const client = new cone.ConeService(`unix:${socket}`, grpc.credentials.createInsecure());

client.Identity({}, (err, ident) => {
  if (err) { console.error(err.message); process.exit(1); }
  client.Receive({ consumer: "node", waitMs: 0 }, (err2, batch) => {
    if (err2) { console.error(err2.message); process.exit(1); }
    console.log(ident.inboxId, batch.messages.length);
    client.close();
  });
});

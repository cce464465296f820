"""cone's bridge to NATS JetStream (`cone daemon --jetstream URL`, docs/jetstream.md).

The daemon stays the one holder of the identity; work fans out to workers through
JetStream. One job per module: `options` (flags, environment, secrets kept out of
logs), `subjects` (the subject scheme), `_connect` (the NATS connection),
`topology` (streams and consumers created or checked), `export` (the inbox to the
inbound stream, exactly once), `replies` (workers' sends and replies, each sent once,
with its outcome), `state` (reachability for status and metrics) and `bridge` (all of
it supervised beside the core). Only the daemon imports it, and only with
`--jetstream`: nats-py is loaded then and not otherwise.
"""

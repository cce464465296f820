"""The HTTP front: JSON-RPC, an event stream, health and metrics over HTTP.

A facade like `cone serve`: it holds no logic. `POST /api/v1/rpc` runs the JSON-RPC
dispatcher and relay of `cone.facades.jsonrpc` (every method, the same params, results
and errors), the event stream is `peek` in a loop, health is `status`'s verdict, and
`/metrics` renders `cone.metrics` with the state `status` reports. The daemon starts
it (`cone daemon --http [HOST:]PORT`) next to `cone.sock`, in the same event loop.
`options` is light (the command line imports it); `server` holds the aiohttp parts.
docs/http.md is the reference.
"""

from cone.facades.http.options import HttpOptions, add_arguments

__all__ = ["HttpOptions", "add_arguments"]

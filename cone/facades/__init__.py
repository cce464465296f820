"""The facades: thin translators from a wire (JSON-RPC, MCP) into ConeService calls.

They hold no logic of their own and never import `cone.store`, `cone.core` or
`cone.engine`: they reach the core through `cone.client` on `cone.sock`, relaying to
the process that holds the identity or hosting the core themselves via
`cone.daemon.runtime` when none does (`cone.startup`).
"""

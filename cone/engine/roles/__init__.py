"""The engine's roles: each a small Protocol the core depends on, with an in-memory
fake beside it, type-checked with it (as httpx ships `MockTransport`).

`Engine` (cone/engine/engine.py) implements every role over libxmtp; the fakes
(`Memory*`) share one in-memory XMTP (`memory.MemoryXmtp`) so that a test composes
the ones it needs (tests/support/fake_engine.py composes them all). Nothing in this
package imports libxmtp.
"""

"""cone: a durable, end-to-end encrypted XMTP messaging identity for agents and programs."""

__version__ = "0.1.0"

#: The JSON-RPC protocol version this package speaks.
PROTOCOL_VERSION = 1

__all__ = ["PROTOCOL_VERSION", "__version__"]

"""The engine: cone's only importer of xmtp-bindings (libxmtp 1.10).

`_client` constructs real libxmtp clients; the rest of the package drives them. The
core sees the engine through `port` only. Importing the package sets nothing: libxmtp's
log level defaults in `_client`, before the first client exists.
"""

"""The engine: cone's only importer of xmtp-bindings (libxmtp 1.10).

`_client` constructs real libxmtp clients; the rest of the package drives them.
"""

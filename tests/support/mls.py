"""Build TLS-serialized MLS structures (RFC 9420) for tests of code that parses them.

Only the framing is real: keys, ciphertexts and signatures are filler bytes.
"""

from __future__ import annotations

import os


def vector(payload: bytes) -> bytes:
    """A variable-length vector: QUIC-style length prefix, then the bytes."""
    n = len(payload)
    if n < 1 << 6:
        prefix = n.to_bytes(1, "big")
    elif n < 1 << 14:
        prefix = (n | 0x4000).to_bytes(2, "big")
    else:
        prefix = (n | 0x8000_0000).to_bytes(4, "big")
    return prefix + payload


def private_message(
    group_id: bytes, *, content_type: int = 1, epoch: int = 1, ciphertext: bytes | None = None
) -> bytes:
    """An MLSMessage carrying a PrivateMessage (what libxmtp sends for every message)."""
    return (
        (1).to_bytes(2, "big")  # mls10
        + (2).to_bytes(2, "big")  # private_message
        + vector(group_id)
        + epoch.to_bytes(8, "big")
        + bytes([content_type])
        + vector(b"")  # authenticated data
        + vector(os.urandom(16))  # encrypted sender data
        + vector(ciphertext if ciphertext is not None else os.urandom(48))
    )


def public_message(group_id: bytes, *, content_type: int = 3, sender_type: int = 1) -> bytes:
    """An MLSMessage carrying a PublicMessage, framed up to its content (filler after)."""
    sender = bytes([sender_type]) + (b"\0\0\0\1" if sender_type in (1, 2) else b"")
    return (
        (1).to_bytes(2, "big")
        + (1).to_bytes(2, "big")  # public_message
        + vector(group_id)
        + (7).to_bytes(8, "big")
        + sender
        + vector(b"")
        + bytes([content_type])
        + os.urandom(40)  # content and auth, not parsed by the node
    )


def key_package(installation_key: bytes, *, inbox_id: str = "ab" * 32) -> bytes:
    """A KeyPackage whose leaf node's signature key is `installation_key`."""
    leaf_node = (
        vector(os.urandom(32))  # encryption key
        + vector(installation_key)  # signature key
        + (1).to_bytes(2, "big")  # basic credential
        + vector(b"\x0a\x40" + inbox_id.encode())  # MlsCredential{inbox_id}
        + vector(b"\x00\x01")  # capabilities: versions
        + vector(b"\x00\x03")  # cipher suites
        + vector(b"")  # extensions
        + vector(b"")  # proposals
        + vector(b"\x00\x01")  # credentials
        + bytes([1])  # leaf node source: key_package
        + (0).to_bytes(8, "big")
        + (2**63).to_bytes(8, "big")  # lifetime
        + vector(b"")  # leaf node extensions
        + vector(os.urandom(64))  # leaf node signature
    )
    return (
        (1).to_bytes(2, "big")
        + (3).to_bytes(2, "big")
        + vector(os.urandom(32))  # init key
        + leaf_node
        + vector(b"")  # extensions
        + vector(os.urandom(64))  # signature
    )

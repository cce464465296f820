"""Read what the node needs from TLS-serialized MLS structures (RFC 9420).

The node never decrypts anything. From a group message it needs the group id and
whether it is a commit, both sent in the clear; from a key package, the
installation key (the leaf node's signature key). Everything is big-endian;
variable-length vectors carry a QUIC-style length prefix whose top two bits give its
size (1, 2 or 4 bytes; `11` is invalid).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MLS_VERSION_10: Final = 1

WIRE_FORMAT_PUBLIC_MESSAGE: Final = 1
WIRE_FORMAT_PRIVATE_MESSAGE: Final = 2
_NON_PROTOCOL_WIRE_FORMATS: Final = {3: "Welcome", 4: "GroupInfo", 5: "KeyPackage"}

CONTENT_TYPE_APPLICATION: Final = 1
CONTENT_TYPE_PROPOSAL: Final = 2
CONTENT_TYPE_COMMIT: Final = 3

_SENDER_MEMBER: Final = 1
_SENDER_EXTERNAL: Final = 2
_SENDER_NEW_MEMBER_PROPOSAL: Final = 3
_SENDER_NEW_MEMBER_COMMIT: Final = 4

_LEAF_NODE_SOURCE_KEY_PACKAGE: Final = 1


class FramingError(ValueError):
    """The bytes are not the MLS structure the node expects; says where and why."""


@dataclass(frozen=True, slots=True)
class ProtocolMessage:
    """The clear-text facts of an MLSMessage carrying a PublicMessage or PrivateMessage."""

    wire_format: int
    group_id: bytes
    epoch: int
    content_type: int

    @property
    def is_commit(self) -> bool:
        """Whether the message is an MLS commit."""
        return self.content_type == CONTENT_TYPE_COMMIT


@dataclass(frozen=True, slots=True)
class KeyPackageInfo:
    """The facts of a KeyPackage the node indexes it by."""

    cipher_suite: int
    installation_key: bytes


class _Reader:
    """A cursor over bytes that raises FramingError instead of reading past the end."""

    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def _take(self, n: int, what: str) -> bytes:
        end = self._pos + n
        if end > len(self._data):
            raise FramingError(
                f"{what} at offset {self._pos} runs past the end ({len(self._data)} bytes)"
            )
        chunk = self._data[self._pos : end]
        self._pos = end
        return chunk

    def uint(self, size: int, what: str) -> int:
        return int.from_bytes(self._take(size, what), "big")

    def vector(self, what: str) -> bytes:
        first = self.uint(1, f"{what} length")
        prefix = first >> 6
        if prefix == 3:
            raise FramingError(
                f"{what} length at offset {self._pos - 1} has the invalid prefix 0b11"
            )
        length = first & 0x3F
        for _ in range((1 << prefix) - 1):
            length = (length << 8) | self.uint(1, f"{what} length")
        return self._take(length, what)

    def end(self, what: str) -> None:
        if self._pos != len(self._data):
            raise FramingError(f"{len(self._data) - self._pos} trailing bytes after the {what}")


def parse_protocol_message(data: bytes) -> ProtocolMessage:
    """Parse an MLSMessage that must carry a PublicMessage or a PrivateMessage.

    A PrivateMessage is read to its exact end. A PublicMessage is read up to its
    content type: its content (proposals, commits) is not parsed, since libxmtp
    only sends PrivateMessages and the node needs nothing beyond the content type.
    """
    r = _Reader(data)
    version = r.uint(2, "version")
    if version != MLS_VERSION_10:
        raise FramingError(f"MLS version {version} is not mls10 (1)")
    wire_format = r.uint(2, "wire format")
    if wire_format in _NON_PROTOCOL_WIRE_FORMATS:
        name = _NON_PROTOCOL_WIRE_FORMATS[wire_format]
        raise FramingError(f"wire format {wire_format} ({name}) is not a protocol message")
    if wire_format not in (WIRE_FORMAT_PUBLIC_MESSAGE, WIRE_FORMAT_PRIVATE_MESSAGE):
        raise FramingError(f"unknown wire format {wire_format}")
    group_id = r.vector("group id")
    if not group_id:
        raise FramingError("the group id is empty")
    epoch = r.uint(8, "epoch")
    if wire_format == WIRE_FORMAT_PRIVATE_MESSAGE:
        content_type = _content_type(r)
        r.vector("authenticated data")
        r.vector("encrypted sender data")
        r.vector("ciphertext")
        r.end("PrivateMessage")
    else:
        sender_type = r.uint(1, "sender type")
        if sender_type in (_SENDER_MEMBER, _SENDER_EXTERNAL):
            r.uint(4, "sender index")
        elif sender_type not in (_SENDER_NEW_MEMBER_PROPOSAL, _SENDER_NEW_MEMBER_COMMIT):
            raise FramingError(f"unknown sender type {sender_type}")
        r.vector("authenticated data")
        content_type = _content_type(r)
    return ProtocolMessage(wire_format, group_id, epoch, content_type)


def _content_type(r: _Reader) -> int:
    content_type = r.uint(1, "content type")
    if content_type not in (CONTENT_TYPE_APPLICATION, CONTENT_TYPE_PROPOSAL, CONTENT_TYPE_COMMIT):
        raise FramingError(f"unknown content type {content_type}")
    return content_type


def parse_key_package(data: bytes) -> KeyPackageInfo:
    """Parse a TLS-serialized KeyPackage (not wrapped in an MLSMessage) to its exact end.

    Signatures and lifetimes are not checked: clients validate every key package
    they fetch and skip bad ones.
    """
    r = _Reader(data)
    version = r.uint(2, "version")
    if version != MLS_VERSION_10:
        raise FramingError(f"MLS version {version} is not mls10 (1)")
    cipher_suite = r.uint(2, "cipher suite")
    r.vector("init key")
    # LeafNode
    r.vector("encryption key")
    signature_key = r.vector("signature key")
    if not signature_key:
        raise FramingError("the leaf node's signature key is empty")
    r.uint(2, "credential type")
    r.vector("credential")  # basic identity or X.509 chain: one vector either way
    for part in ("versions", "cipher suites", "extensions", "proposals", "credentials"):
        r.vector(f"capabilities {part}")
    source = r.uint(1, "leaf node source")
    if source != _LEAF_NODE_SOURCE_KEY_PACKAGE:
        raise FramingError(f"leaf node source {source} is not key_package (1)")
    r.uint(8, "lifetime not_before")
    r.uint(8, "lifetime not_after")
    r.vector("leaf node extensions")
    r.vector("leaf node signature")
    # back in KeyPackage
    r.vector("key package extensions")
    r.vector("key package signature")
    r.end("KeyPackage")
    return KeyPackageInfo(cipher_suite, signature_key)

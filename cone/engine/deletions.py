"""Peers' deletions: which message a deleteMessage content names (libxmtp decodes it)."""

from __future__ import annotations

from xmtp_bindings import xmtpv3 as ffi

_HEX = frozenset("0123456789abcdef")


def deleted_message_id(encoded_content: bytes) -> str | None:
    """The message id a deleteMessage content names, or None for anything else."""
    try:
        decoded = ffi.decode_delete_message(encoded_content)
    except ffi.FfiError:
        return None
    target = str(decoded.message_id).lower()
    return target if target and set(target) <= _HEX else None


__all__ = ["deleted_message_id"]

"""Construct real libxmtp clients with xmtp-bindings 0.1.8, bypassing the `xmtp` SDK.

The `xmtp` 0.1.8 SDK's `Client.create` does not work with these bindings (it builds
`DbOptions` with two of four required fields), so this module calls the bindings
directly. Choices, each needed offline (a devnet, or any node without XMTP's
auxiliary servers):

- `sync_api` is the node's own API client: libxmtp sends group-message queries and
  identity refreshes through it, and the SDK would point it at the history server.
- Device sync is DISABLED by default: no sync group is created, so a one-installation
  identity makes no device-sync traffic and needs no history-sync server. ENABLED
  also works against a devnet (the sync group is ordinary MLS traffic); only
  archive upload/download needs a history server, which the devnet does not have.
- The wallet is a raw secp256k1 key; registration signs libxmtp's text with
  EIP-191 (personal_sign) through the bindings' own signer.
"""

from __future__ import annotations

import os
import secrets
from typing import Final

from xmtp_bindings import xmtpv3 as ffi

import cone

# libxmtp logs through Rust's tracing to stderr and reads RUST_LOG when its first client
# is made (through this module); keep it to errors unless the operator asks for more.
os.environ.setdefault("RUST_LOG", "error")


def _identifier_hash(self: ffi.FfiIdentifier) -> int:
    return hash((self.identifier, self.identifier_kind))


# xmtp-bindings 0.1.8's FfiIdentifier defines __eq__ without __hash__, so
# `FfiXmtpClient.can_message`, whose result is a dict keyed by FfiIdentifier,
# raises TypeError while building it. Hashing by value fixes it.
if ffi.FfiIdentifier.__hash__ is None:
    ffi.FfiIdentifier.__hash__ = _identifier_hash

#: The order of secp256k1: a private key is an integer in [1, N).
_SECP256K1_N: Final = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141

#: The nonce cone derives inbox ids with (the first inbox of an address).
INBOX_NONCE: Final = 0

#: libxmtp's database key length.
DB_KEY_BYTES: Final = 32


def generate_wallet_key() -> bytes:
    """A fresh random secp256k1 private key (32 bytes)."""
    while True:
        key = secrets.token_bytes(32)
        if 0 < int.from_bytes(key, "big") < _SECP256K1_N:
            return key


def wallet_address(key: bytes) -> str:
    """The Ethereum address of a private key: lowercase `0x` + 40 hex."""
    return str(ffi.ethereum_address_from_pubkey(ffi.ethereum_generate_public_key(key))).lower()


def identifier(address: str) -> ffi.FfiIdentifier:
    """The libxmtp identifier of an Ethereum address."""
    return ffi.FfiIdentifier(
        identifier=address.lower(), identifier_kind=ffi.FfiIdentifierKind.ETHEREUM
    )


def inbox_id_for(address: str) -> str:
    """The inbox id an address creates with nonce 0 (no network involved)."""
    return str(ffi.generate_inbox_id(identifier(address), INBOX_NONCE))


async def connect(
    api_url: str, *, app_version: str | None = None, gateway_url: str | None = None
) -> ffi.XmtpApiClient:
    """An API client for a node URL; `https://` means TLS, `http://` plain h2c.
    With `gateway_url`, libxmtp runs in D14N mode: it publishes through that gateway
    and reads from the node the gateway names (`api_url` is then unused).

    The channel connects lazily: nothing is sent until the first call."""
    return await ffi.connect_to_backend(
        v3_host=api_url,
        gateway_host=gateway_url,
        # In D14N mode the flag covers the gateway and every node it names.
        is_secure=(gateway_url or api_url).startswith("https://"),
        client_mode=None,
        app_version=app_version or f"cone/{cone.__version__}",
        auth_callback=None,
        auth_handle=None,
    )


async def open_client(
    *,
    api_url: str,
    db_path: str,
    db_key: bytes,
    wallet_key: bytes,
    register: bool = True,
    device_sync: bool = False,
    allow_offline: bool = False,
    gateway_url: str | None = None,
) -> ffi.FfiXmtpClient:
    """Open (or create) the libxmtp client of a wallet, with its database at `db_path`.

    `allow_offline` makes no network call while opening: for an installation already
    registered in `db_path` (libxmtp 1.10 then skips refreshing the inbox's identity
    updates, which its next sync does). With `register`, a client whose installation is not yet on the network signs
    libxmtp's registration text with the wallet and registers it (a new inbox, or a
    new installation of an existing one). Without it, the caller can inspect
    `client.signature_request()`: None means the installation is registered.
    `gateway_url` selects D14N (see `connect`).
    Raises `ffi.FfiError` (libxmtp's errors) and ValueError for a bad key length.
    """
    if len(db_key) != DB_KEY_BYTES:
        raise ValueError(f"the libxmtp database key must be {DB_KEY_BYTES} bytes")
    api = await connect(api_url, gateway_url=gateway_url)
    ident = identifier(wallet_address(wallet_key))
    client = await ffi.create_client(
        api,
        api,
        ffi.DbOptions(
            db=db_path, encryption_key=db_key, max_db_pool_size=None, min_db_pool_size=None
        ),
        inbox_id_for(ident.identifier),
        ident,
        INBOX_NONCE,
        None,
        ffi.FfiDeviceSyncMode.ENABLED if device_sync else ffi.FfiDeviceSyncMode.DISABLED,
        allow_offline,
        None,
    )
    if register:
        request = client.signature_request()
        if request is not None:
            text = await request.signature_text()
            await request.add_ecdsa_signature(
                ffi.ethereum_sign_recoverable(text.encode(), wallet_key, True)
            )
            await client.register_identity(request)
    return client

"""A stopped daemon's state, opened the way the daemon opens it: for checks on disk.

store = open_store(home)                      # cone's SQLCipher store, with its key
client = await open_xmtp(home, devnet_url)    # its libxmtp client (daemon stopped)
conn = open_xmtp_db(home)                     # libxmtp's database itself, as SQL
key = xmtp_key(home)                          # the key of libxmtp's database
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cone.config import KEY_FILE_NAME, STORE_NAME, XMTP_DB_NAME
from cone.engine import _client
from cone.store import Store, load_db_key, meta
from cone.store.xmtp_database import open_xmtp_database


def store_key(home: Path) -> bytes:
    """The database key of a state directory made with the default key file."""
    return load_db_key(key_file=None, default_key_file=home / KEY_FILE_NAME, store_exists=True)


def open_store(home: Path) -> Store:
    """cone's store of a state directory whose daemon is stopped (close it after)."""
    return Store.open(home / STORE_NAME, store_key(home))


async def open_xmtp(home: Path, api_url: str) -> Any:
    """The libxmtp client of a state directory whose daemon is stopped: the same
    installation, never a new one (release its database after)."""
    store = open_store(home)
    try:
        wallet = store.read_now(meta.get, "wallet_key")
        xmtp_key = store.read_now(meta.get, "xmtp_db_key")
    finally:
        store.close()
    assert wallet is not None and xmtp_key is not None
    client = await _client.open_client(
        api_url=api_url,
        db_path=str(home / XMTP_DB_NAME),
        db_key=xmtp_key,
        wallet_key=wallet,
        register=False,
    )
    assert client.signature_request() is None, "not the daemon's installation"
    return client


def xmtp_key(home: Path) -> bytes:
    """The key of libxmtp's database, as cone keeps it, of a stopped daemon."""
    store = open_store(home)
    try:
        key = store.read_now(meta.get, "xmtp_db_key")
    finally:
        store.close()
    assert key is not None
    return key


def open_xmtp_db(home: Path) -> Any:
    """libxmtp's database of a stopped daemon, opened as libxmtp opens it, with the key
    cone keeps for it (close it after; never in a process where libxmtp has it open:
    cone/store/xmtp_database.py)."""
    return open_xmtp_database(home / XMTP_DB_NAME, xmtp_key(home))

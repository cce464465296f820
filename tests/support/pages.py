"""Every page of a SQLCipher 4 database on disk, decrypted: for checks that content is
gone from the file itself (free space, old page versions and the WAL included), not
just from what SQL can still select.

SQLCipher 4 with a raw key (`x'…'`, as cone's store uses): pages of 4,096 bytes, each
AES-256-CBC encrypted with the key itself, the last 80 bytes of a page reserved for
its IV (16 bytes) and HMAC; page 1 starts with the 16-byte salt. The WAL holds whole
pages after a 32-byte file header and a 24-byte header per frame. (`cryptography`
comes with the `mcp` dependency, through `pyjwt[crypto]`.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

PAGE = 4096
RESERVE = 80


def _decrypt(page: bytes, key: bytes, first: bool) -> bytes:
    start = 16 if first else 0
    iv = page[PAGE - RESERVE : PAGE - RESERVE + 16]
    decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    return decryptor.update(page[start : PAGE - RESERVE]) + decryptor.finalize()


def plaintext_pages(db: Path, key: bytes) -> Iterator[bytes]:
    """The decrypted pages of `db` and of its WAL (if there is one)."""
    data = db.read_bytes()
    for i in range(0, len(data) - PAGE + 1, PAGE):
        yield _decrypt(data[i : i + PAGE], key, first=i == 0)
    wal = Path(f"{db}-wal")
    if wal.exists():
        log = wal.read_bytes()
        for i in range(32, len(log) - 24 - PAGE + 1, 24 + PAGE):
            number = int.from_bytes(log[i : i + 4], "big")
            yield _decrypt(log[i + 24 : i + 24 + PAGE], key, first=number == 1)


def on_disk(db: Path, key: bytes, needle: bytes) -> bool:
    """Whether `needle` is anywhere in the decrypted database or its WAL."""
    return any(needle in page for page in plaintext_pages(db, key))

"""Opening an identity's libxmtp client for the engine, with cone's two refusals.

A registered identity opens offline and never registers a new installation by
accident (XMTP allows 10 per inbox); a damaged database is reported with what to do.
Around the opening, cone's index in libxmtp's database is kept (cone/engine/_cursor_index.py).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cone.engine import _cursor_index
from cone.engine._calls import Calls
from cone.engine._children import DatabaseChild
from cone.engine._client import open_client
from cone.engine._errors import detail, is_damaged_database
from cone.engine._offload import Offload
from cone.errors import ConeError, FailedPrecondition, StateError

# Registering a new installation is a handful of node calls; against an unreachable
# node libxmtp gives up after about 2 s, this bounds a node that never answers.
REGISTER_S: Final = 60.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Opened:
    """An open client, its identity, and how to open its database again through a
    D14N gateway (registering nothing, offline)."""

    client: Any
    inbox_id: str
    installation_id: str
    reopen: Callable[[str], Awaitable[Any]]


async def open_identity(
    offload: Offload,
    *,
    api_url: str,
    db_path: str,
    db_key: bytes,
    wallet_key: bytes,
    new: bool,
    gateway_url: str | None,
    child: DatabaseChild,
) -> Opened:
    """Open the client on `offload`. With `new=False` a new installation is refused
    (FailedPrecondition), not made, and nothing goes to the network; a damaged
    database is StateError(corrupt_database). On any failure `offload` is closed.
    `child` works on the database file beside libxmtp (cone/engine/_children.py)."""
    opening = functools.partial(
        open_client, api_url=api_url, db_path=db_path, db_key=db_key, wallet_key=wallet_key
    )

    async def reopen(gateway: str) -> Any:
        return await opening(gateway_url=gateway, register=False, allow_offline=True)

    indexed = False

    async def opened() -> tuple[Any, bool, str, str]:
        nonlocal indexed
        indexed = _cursor_index.drop_stale(Path(db_path), db_key, child)
        client = await opening(gateway_url=gateway_url, register=new, allow_offline=not new)
        registered = client.signature_request() is None
        return client, registered, client.inbox_id(), bytes(client.installation_id()).hex()

    try:
        client, registered, inbox_id, installation_id = await Calls(offload).call(
            opened, REGISTER_S, "opening the XMTP client"
        )
    except ConeError as err:
        offload.close()
        cause = err.__cause__
        if cause is not None and is_damaged_database(cause):
            raise StateError(
                f"libxmtp's database {db_path} cannot be opened ({detail(str(cause))}): it "
                "or its salt file is damaged. Restore the identity from a backup (cone "
                "restore FILE --home NEW_HOME) and start there",
                reason="corrupt_database",
            ) from cause
        raise
    if not new and not registered:
        offload.close()
        raise FailedPrecondition(
            "libxmtp's database does not hold this identity's installation; refusing to "
            "register a new installation (XMTP allows 10 per inbox). Restore the database "
            "or start with a new state directory.",
            reason="installation_mismatch",
        )
    if not indexed:
        # Once libxmtp's migrations are done. It bounds itself (MAKE_S) and fails nothing.
        try:
            await Calls(offload).call_sync(
                functools.partial(_cursor_index.make, Path(db_path), db_key, child),
                _cursor_index.MAKE_S + 2 * child.CHILD_GRACE_S,
                "indexing libxmtp's messages",
            )
        except ConeError as err:
            log.warning("%s", err)
    return Opened(client, inbox_id, installation_id, reopen)


__all__ = ["REGISTER_S", "Opened", "open_identity"]

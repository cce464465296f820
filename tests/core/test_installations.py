"""revokeInstallations against the devnet: a second installation of cone's own wallet."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cone.engine import _client
from cone.errors import InvalidArgument, NotFound
from conepb.v1 import cone_pb2 as pb
from support.daemons import DaemonProcess
from support.peers import Peer


async def _installations_seen_by(peer: Peer, inbox_id: str) -> int:
    (state,) = await peer.client.addresses_from_inbox_id(True, [inbox_id])
    return len(state.installations)


async def test_revoking_other_installations_leaves_only_this_one(
    home: Path, devnet: str, alice: Peer, tmp_path: Path
) -> None:
    wallet = _client.generate_wallet_key()
    async with DaemonProcess(home, devnet, extra_env={"CONE_WALLET_KEY": wallet.hex()}) as d:
        ident = await d.client.identity()
        others = [
            await _client.open_client(
                api_url=devnet,
                db_path=str(tmp_path / f"second-{i}.db3"),
                db_key=os.urandom(32),
                wallet_key=wallet,
            )
            for i in range(2)
        ]
        try:
            ids = [bytes(c.installation_id()).hex() for c in others]
            assert await _installations_seen_by(alice, ident.inbox_id) == 3

            async def revoke(**kw: object) -> pb.RevokeInstallationsResponse:
                request = pb.RevokeInstallationsRequest(**kw)  # type: ignore[arg-type]
                return await d.client.call("RevokeInstallations", request)

            with pytest.raises(InvalidArgument):
                await revoke()
            with pytest.raises(InvalidArgument):
                await revoke(installation_ids=[ident.installation_id])
            with pytest.raises(NotFound) as err:
                await revoke(installation_ids=["ab" * 32])
            assert err.value.reason == "unknown_installation"

            one = await revoke(installation_ids=[ids[0]])
            assert list(one.revoked_installation_ids) == [ids[0]] and one.installations == 2
            rest = await revoke(all_except_this=True)
            assert list(rest.revoked_installation_ids) == [ids[1]] and rest.installations == 1
            assert await _installations_seen_by(alice, ident.inbox_id) == 1
            assert list((await revoke(all_except_this=True)).revoked_installation_ids) == []
            # cone itself still works.
            await d.client.call("Connect", pb.ConnectRequest(to=alice.address))
        finally:
            for c in others:
                c.release_db_connection()

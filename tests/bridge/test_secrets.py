"""The agent command gets no cone secret in its environment."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path

from cone.engine import _client
from support.daemons import run_cone
from support.peers import Peer

from ._helpers import accept, dm_to, settled, texts_when
from .conftest import Agent, BridgeProcess

SECRETS = {
    "CONE_DB_KEY": secrets.token_hex(32),
    "CONE_WALLET_KEY": _client.generate_wallet_key().hex(),
    "CONE_BACKUP_PASSPHRASE": "never for the agent",
}


async def test_the_agent_gets_no_cone_secret_only_the_allowed_and_named_variables(
    home: Path, devnet: str, alice: Peer, agent: Callable[[str], Agent]
) -> None:
    printer = agent('note("end", environ=dict(os.environ))\nprint("seen")\n')
    extra = {**SECRETS, "AGENT_API_KEY": "for the agent", "UNRELATED_TOKEN": "not for it"}
    options = ["--pass-env", "AGENT_API_KEY"]
    async with BridgeProcess(home, devnet, printer.argv, options, extra_env=extra) as bridge:
        dm = await dm_to(alice, bridge)
        await alice.send(dm, "what do you see?")
        await accept(bridge, dm)
        assert await texts_when(alice, dm, 2) == ["what do you see?", "seen"]
        await settled(bridge)
        # The bridge did use the secrets it was given: the identity is the wallet's.
        ident = await bridge.client.identity()
        assert ident.address == _client.wallet_address(bytes.fromhex(SECRETS["CONE_WALLET_KEY"]))
    (end,) = printer.events("end")
    environ = end["environ"]
    leaked = [v for v in SECRETS.values() if any(v in x for x in environ.values())]
    assert not (set(SECRETS) & set(environ)) and not leaked
    assert environ["AGENT_API_KEY"] == "for the agent"
    assert "UNRELATED_TOKEN" not in environ
    assert environ["PATH"] == os.environ["PATH"]
    assert environ["CONE_HOME"] == str(home)
    assert environ["CONE_TURN_ID"] == end["turnId"]


async def test_naming_a_cone_secret_with_pass_env_is_refused(home: Path) -> None:
    code, err = await run_cone(
        ["bridge", "--home", str(home), "--pass-env", "CONE_DB_KEY", "--", "true"]
    )
    assert code == 2, err.decode()
    assert b"never passed to the agent" in err

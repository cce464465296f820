"""Which backend and endpoints the settings give: flag > environment > the network's."""

from __future__ import annotations

from pathlib import Path

import pytest

from cone.config import Settings, seconds_from_environment
from cone.errors import InvalidArgument
from support.daemons import run_cone


@pytest.fixture(autouse=True)
def _no_network_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CONE_NETWORK", "CONE_API_URL", "CONE_GATEWAY_URL"):
        monkeypatch.delenv(name, raising=False)


def test_v3_networks_run_without_a_gateway_unless_one_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    local = Settings.resolve(network="local")
    assert (local.api_url, local.gateway_url, local.backend) == (
        "http://127.0.0.1:5556",
        None,
        "v3",
    )
    # The devnet's URL is also its gateway: given as such, cone runs on D14N there.
    d14n = Settings.resolve(network="local", gateway_url="http://127.0.0.1:5556")
    assert (d14n.gateway_url, d14n.backend) == ("http://127.0.0.1:5556", "d14n")
    monkeypatch.setenv("CONE_GATEWAY_URL", "http://127.0.0.1:7777")
    assert Settings.resolve(network="dev").gateway_url == "http://127.0.0.1:7777"
    assert Settings.resolve(network="dev", gateway_url="http://g:1").gateway_url == "http://g:1"


def test_at_the_cutover_local_moves_through_its_own_url_and_dev_needs_a_gateway() -> None:
    assert Settings.resolve(network="local").cutover_gateway == "http://127.0.0.1:5556"
    moved = Settings.resolve(network="local", api_url="http://127.0.0.1:9")
    assert moved.cutover_gateway == "http://127.0.0.1:9"
    assert Settings.resolve(network="production").cutover_gateway is None
    given = Settings.resolve(network="dev", gateway_url="https://gw.example:443")
    assert given.cutover_gateway == "https://gw.example:443"


def test_xmtps_d14n_networks_bring_their_published_gateway() -> None:
    testnet = Settings.resolve(network="testnet")
    assert testnet.backend == "d14n"
    assert testnet.gateway_url == "https://payer.testnet.xmtp.network:443"
    assert testnet.api_url == "https://grpc.testnet.xmtp.network:443"
    dev = Settings.resolve(network="testnet-dev")
    assert dev.gateway_url == "https://payer.testnet-dev.xmtp.network:443"


def test_mainnet_has_no_published_gateway_and_requires_one() -> None:
    with pytest.raises(InvalidArgument) as err:
        Settings.resolve(network="mainnet")
    assert err.value.field == "gateway_url" and "--gateway-url" in err.value.message
    mine = Settings.resolve(network="mainnet", gateway_url="https://gateway.example:443")
    assert (mine.backend, mine.api_url) == ("d14n", "https://gateway.example:443")


async def test_cone_says_which_setting_mainnet_needs(tmp_path: Path) -> None:
    code, err = await run_cone(["daemon", "--home", str(tmp_path), "--network", "mainnet"])
    assert code == 2
    assert b"mainnet network needs a gateway" in err and b"--gateway-url" in err


async def test_a_first_start_without_its_gateway_names_the_gateway(tmp_path: Path) -> None:
    # Nothing listens on port 1: libxmtp in D14N mode cannot reach the gateway.
    code, err = await run_cone(
        ["daemon", "--home", str(tmp_path / "h"), "--gateway-url", "http://127.0.0.1:1"]
    )
    assert code == 5
    assert (
        "cannot reach the XMTP gateway at http://127.0.0.1:1 to register this new identity"
        in err.decode()
    )


def test_a_bound_from_the_environment_is_a_positive_number_of_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CONE_PREFACE_TIMEOUT_S", raising=False)
    assert seconds_from_environment("CONE_PREFACE_TIMEOUT_S", 10.0) == 10.0
    monkeypatch.setenv("CONE_PREFACE_TIMEOUT_S", "")
    assert seconds_from_environment("CONE_PREFACE_TIMEOUT_S", 10.0) == 10.0
    monkeypatch.setenv("CONE_PREFACE_TIMEOUT_S", "0.5")
    assert seconds_from_environment("CONE_PREFACE_TIMEOUT_S", 10.0) == 0.5
    for bad in ("0", "-1", "ten"):
        monkeypatch.setenv("CONE_PREFACE_TIMEOUT_S", bad)
        with pytest.raises(InvalidArgument) as refused:
            seconds_from_environment("CONE_PREFACE_TIMEOUT_S", 10.0)
        assert refused.value.field == "CONE_PREFACE_TIMEOUT_S"
        assert "positive number of seconds" in refused.value.message

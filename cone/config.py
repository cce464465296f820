"""Where cone keeps its state and which network it talks to.

Precedence, highest first, for every setting: the command-line flag, then the
environment variable, then the default.

| setting        | flag                | environment        | default                                   |
| -------------- | ------------------- | ------------------ | ----------------------------------------- |
| state directory| `--home`            | `CONE_HOME`        | `$XDG_STATE_HOME/cone`, else `~/.local/state/cone` |
| network        | `--network`         | `CONE_NETWORK`     | `local` (a `cone devnet` on this machine) |
| node URL       | `--api-url`         | `CONE_API_URL`     | the network's URL (below)                 |
| D14N gateway   | `--gateway-url`     | `CONE_GATEWAY_URL` | the network's gateway on a D14N network; none (V3) otherwise |
| database key   | `--key-file`        | `CONE_DB_KEY`      | key file `db.key` in the state directory  |
| wallet key     | `--wallet-key-file` | `CONE_WALLET_KEY`  | a new key, made on first start            |
| catch-up period| —                   | `CONE_CATCHUP_S`   | 30 seconds between full syncs             |
| remote files   | —                   | `CONE_ATTACHMENT_ALLOW_LOCAL` | off: only public `https://` URLs are downloaded |
| download bound | —                   | `CONE_ATTACHMENT_TIMEOUT_S` | 60 seconds a remote attachment        |
| preface bound  | —                   | `CONE_PREFACE_TIMEOUT_S` | 10 seconds for the rest of a begun HTTP/2 preface on `cone.sock` |
| stop bound     | —                   | `CONE_STOP_BOUND_S` | 10 seconds from the first SIGTERM/SIGINT to a forced exit |
| request budget | —                   | `CONE_REQUEST_SENDER_MESSAGES`, `CONE_REQUEST_SENDER_BYTES`, `CONE_REQUEST_TOTAL_MESSAGES`, `CONE_REQUEST_TOTAL_BYTES` | 200 messages and 2 MiB per sender, 5,000 and 64 MiB in all (`cone.limits.RequestBudget`) |
| devnet state   | `cone devnet --db`  | —                  | `devnet/PORT.db` in the XDG state dir's `cone` (`--ephemeral`: memory) |

The devnet's state file is not in `--home`/`CONE_HOME`: those name one identity,
and one devnet serves many (`devnet_db`).

`CONE_DB_KEY` (64 hex characters) wins over any key file, so that a key can be
injected by a secret manager without touching the disk.

The secrets among these (`SECRET_ENV`) are taken out of the process environment as
soon as a command starts (`take_secrets`), so that no process cone starts (the
bridge's agent command above all) inherits them; cone reads them with `secret`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cone.limits import REQUEST_BUDGET, RequestBudget


@dataclass(frozen=True)
class Network:
    """A named XMTP network: the node to reach, and whether it is a D14N one."""

    #: The node URL: xmtp-node-go's on a V3 network, an xmtpd node's on D14N (where
    #: libxmtp reads from the nodes its gateway names, so this one is not called).
    node: str
    #: Whether the network is XMTP's decentralized one (libxmtp needs a gateway).
    d14n: bool = False
    #: The gateway XMTP publishes for it (D14N networks), or None: then the
    #: operator's own gateway (`--gateway-url`) is required.
    gateway: str | None = None
    #: Whether the node is its own D14N gateway (a `cone devnet`): a V3 identity there
    #: moves to D14N at the cutover through the node's URL, with no setting.
    own_gateway: bool = False


#: The named networks. The D14N endpoints are the ones libxmtp 1.10 ships for
#: those environments (`xmtp_configuration` `common/api.rs`) and XMTP's network-nodes
#: page lists; XMTP documents no mainnet endpoint, where every app runs its own
#: gateway service (docs/networks.md).
NETWORKS: Final[dict[str, Network]] = {
    "local": Network("http://127.0.0.1:5556", own_gateway=True),
    "dev": Network("https://grpc.dev.xmtp.network:443"),
    "production": Network("https://grpc.production.xmtp.network:443"),
    "testnet-dev": Network(
        "https://grpc.testnet-dev.xmtp.network:443",
        d14n=True,
        gateway="https://payer.testnet-dev.xmtp.network:443",
    ),
    "testnet-staging": Network(
        "https://grpc.testnet-staging.xmtp.network:443",
        d14n=True,
        gateway="https://payer.testnet-staging.xmtp.network:443",
    ),
    "testnet": Network(
        "https://grpc.testnet.xmtp.network:443",
        d14n=True,
        gateway="https://payer.testnet.xmtp.network:443",
    ),
    "mainnet": Network("", d14n=True),
}

#: The default node URL of each named network.
NETWORK_URLS: Final[dict[str, str]] = {name: n.node for name, n in NETWORKS.items()}

SOCKET_NAME: Final = "cone.sock"
LOCK_NAME: Final = "cone.lock"
STORE_NAME: Final = "cone.db"
XMTP_DB_NAME: Final = "xmtp.db3"
KEY_FILE_NAME: Final = "db.key"

#: Environment variables that carry secrets: never passed on to a child process.
#: (The JetStream URL may carry a NATS user and password; cone/jetstream/options.py.)
SECRET_ENV: Final = (
    "CONE_DB_KEY",
    "CONE_WALLET_KEY",
    "CONE_BACKUP_PASSPHRASE",
    "CONE_JETSTREAM",
    "CONE_JETSTREAM_TOKEN",
)
_taken: dict[str, str] = {}


def take_secrets() -> None:
    """Move cone's secrets from the environment into this process's memory only."""
    for name in SECRET_ENV:
        value = os.environ.pop(name, None)
        if value is not None:
            _taken[name] = value


def secret(name: str) -> str | None:
    """A secret from the environment, or as `take_secrets` kept it."""
    return os.environ.get(name) or _taken.get(name)


def drop_secrets(*names: str) -> None:
    """Forget secrets (from the environment and from what `take_secrets` kept)."""
    for name in names:
        os.environ.pop(name, None)
        _taken.pop(name, None)


@dataclass(frozen=True)
class Paths:
    """The files of one state directory."""

    home: Path

    @property
    def socket(self) -> Path:
        """The Unix socket the core serves on."""
        return self.home / SOCKET_NAME

    @property
    def lock(self) -> Path:
        """The lock file: whoever holds its flock owns the identity."""
        return self.home / LOCK_NAME

    @property
    def store(self) -> Path:
        """cone's own SQLCipher database."""
        return self.home / STORE_NAME

    @property
    def xmtp_db(self) -> Path:
        """libxmtp's encrypted database."""
        return self.home / XMTP_DB_NAME

    @property
    def default_key_file(self) -> Path:
        """Where the database key lives when no other source is given."""
        return self.home / KEY_FILE_NAME


def resolve_home(flag: str | None = None) -> Path:
    """The state directory from `--home`, `CONE_HOME` or the XDG default."""
    if flag:
        return Path(flag).expanduser().absolute()
    env = os.environ.get("CONE_HOME")
    if env:
        return Path(env).expanduser().absolute()
    return state_base()


def state_base() -> Path:
    """cone's directory under the XDG state dir: `$XDG_STATE_HOME/cone`, else
    `~/.local/state/cone` (the default identity's home, and the devnet's parent)."""
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return (base / "cone").absolute()


def devnet_db(port: int) -> Path:
    """Where `cone devnet --port PORT` keeps its state by default: one file per port,
    so that devnets on different ports never share (or fight over) one."""
    return state_base() / "devnet" / f"{port}.db"


def resolve_network(flag: str | None = None) -> str:
    """The network name from `--network`, `CONE_NETWORK` or `local`."""
    network = flag or os.environ.get("CONE_NETWORK") or "local"
    if network not in NETWORK_URLS:
        from cone.errors import InvalidArgument

        raise InvalidArgument(
            f"unknown network {network!r}: use one of {', '.join(NETWORK_URLS)}", field="network"
        )
    return network


def resolve_gateway_url(network: str, flag: str | None = None) -> str | None:
    """The D14N gateway from `--gateway-url`, `CONE_GATEWAY_URL` or the network's;
    None runs V3. A D14N network XMTP publishes no gateway for requires one."""
    url = flag or os.environ.get("CONE_GATEWAY_URL") or NETWORKS[network].gateway
    if url is None and NETWORKS[network].d14n:
        from cone.errors import InvalidArgument

        raise InvalidArgument(
            f"the {network} network needs a gateway: XMTP documents no public gateway "
            "for it (each app runs its own XMTP gateway service); give --gateway-url or "
            "CONE_GATEWAY_URL (docs/networks.md)",
            field="gateway_url",
        )
    return url


def resolve_api_url(network: str, flag: str | None = None, gateway_url: str | None = None) -> str:
    """The node URL from `--api-url`, `CONE_API_URL` or the network's default (for a
    D14N network with none, the gateway's: libxmtp reads from the nodes it names)."""
    return flag or os.environ.get("CONE_API_URL") or NETWORK_URLS[network] or gateway_url or ""


#: The default of `Settings.preface_timeout_s`: a client that stops part-way through
#: the HTTP/2 preface is closed rather than held forever (cone/daemon/socket_front.py).
PREFACE_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True)
class Settings:
    """Everything the core needs to start, resolved once at the edge."""

    paths: Paths
    network: str
    api_url: str
    #: The D14N gateway libxmtp publishes through (D14N mode), or None (V3 mode).
    gateway_url: str | None = None
    key_file: Path | None = None
    wallet_key_file: Path | None = None
    catchup_interval_s: float = 30.0
    #: How long a connection to `cone.sock` that began the HTTP/2 preface gets to end it.
    preface_timeout_s: float = PREFACE_TIMEOUT_S
    #: What requests may hold in the store (`cone.limits.RequestBudget`).
    request_budget: RequestBudget = REQUEST_BUDGET

    @classmethod
    def resolve(
        cls,
        *,
        home: str | None = None,
        network: str | None = None,
        api_url: str | None = None,
        key_file: str | None = None,
        wallet_key_file: str | None = None,
        gateway_url: str | None = None,
    ) -> Settings:
        """Settings from flags (None when not given), the environment and defaults."""
        net = resolve_network(network)
        gateway = resolve_gateway_url(net, gateway_url)
        return cls(
            paths=Paths(resolve_home(home)),
            network=net,
            api_url=resolve_api_url(net, api_url, gateway),
            gateway_url=gateway,
            key_file=Path(key_file).expanduser().absolute() if key_file else None,
            wallet_key_file=(
                Path(wallet_key_file).expanduser().absolute() if wallet_key_file else None
            ),
            catchup_interval_s=seconds_from_environment("CONE_CATCHUP_S", 30.0),
            preface_timeout_s=seconds_from_environment("CONE_PREFACE_TIMEOUT_S", PREFACE_TIMEOUT_S),
            request_budget=RequestBudget.from_environment(os.environ),
        )

    @property
    def backend(self) -> str:
        """`d14n` with a gateway, `v3` without."""
        return "d14n" if self.gateway_url else "v3"

    @property
    def cutover_gateway(self) -> str | None:
        """The gateway this identity moves to when its V3 node cuts over: the one in
        use or given, else the node's URL on a network that is its own gateway
        (`local`); None where XMTP documents no successor gateway (`dev`,
        `production`: then the operator must give `--gateway-url`)."""
        if self.gateway_url:
            return self.gateway_url
        return self.api_url if NETWORKS[self.network].own_gateway else None


def seconds_from_environment(name: str, default: float) -> float:
    """The positive number of seconds the environment variable `name` gives, or
    `default` when it is unset or empty (InvalidArgument when it is not one)."""
    text = os.environ.get(name)
    return _positive(text, name) if text else default


def _positive(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if value <= 0:
        from cone.errors import InvalidArgument

        raise InvalidArgument(f"{name} must be a positive number of seconds", field=name)
    return value

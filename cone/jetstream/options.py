"""The JetStream bridge's options: `--jetstream nats://HOST:PORT` and the flags around it.

Each flag has an environment variable beside it, the flag winning (as for every
setting, cone/config.py). Off unless a URL is given. Credentials come through NATS's
own mechanisms only: user and password (or a token) in the URL, `CONE_JETSTREAM_TOKEN`,
a creds file (`--jetstream-creds`, which needs the `nkeys` package), TLS with `tls://`
and a CA file (`--jetstream-ca`). The URL and the token are secrets: cone takes them out
of its environment at start (`cone.config.SECRET_ENV`) and never prints them
(`redacted`).
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from cone.config import secret
from cone.errors import InvalidArgument

URL_ENV = "CONE_JETSTREAM"
TOKEN_ENV = "CONE_JETSTREAM_TOKEN"
DEFAULT_CONSUMER = "jetstream"
DEFAULT_PREFIX = "cone"
DEFAULT_PARTITIONS = 8
DEFAULT_ACK_WAIT_S = 30.0
DEFAULT_MAX_DELIVER = 10
_SCHEMES = ("nats", "tls")
# A subject token: no dots, wildcards or spaces (NATS), and kept to a readable set.
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


def redacted(url: str) -> str:
    """`url` without its user, password or token: what logs and errors may show."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}"


@dataclass(frozen=True)
class JetStreamOptions:
    """Where the JetStream is and how cone lays its streams out there."""

    #: Comma-separated server URLs (a cluster's seeds); may carry credentials.
    url: str
    #: cone's consumer (receipts) whose inbox the export reads.
    consumer: str = DEFAULT_CONSUMER
    #: The first token of every subject and stream name.
    prefix: str = DEFAULT_PREFIX
    #: Partitions of the inbound subjects: one worker at a time per partition.
    partitions: int = DEFAULT_PARTITIONS
    #: How long a worker holds a message before JetStream redelivers it.
    ack_wait_s: float = DEFAULT_ACK_WAIT_S
    #: Deliveries of one inbound message at most (a poison message ends there).
    max_deliver: int = DEFAULT_MAX_DELIVER
    #: Replicas of each stream (3 on a 3-node cluster).
    replicas: int = 1
    creds: Path | None = None
    ca: Path | None = None
    token: str | None = field(default=None, repr=False)

    @property
    def servers(self) -> list[str]:
        """The server URLs, one per seed."""
        return [u.strip() for u in self.url.split(",") if u.strip()]

    @property
    def shown(self) -> str:
        """The servers as logs show them (no credentials)."""
        return ",".join(redacted(u) for u in self.servers)

    def __repr__(self) -> str:
        return f"JetStreamOptions({self.shown}, consumer={self.consumer!r})"

    def check(self) -> None:
        """InvalidArgument unless every option is usable."""
        if not self.servers:
            raise InvalidArgument(
                "--jetstream: give a URL such as nats://HOST:PORT", field="jetstream"
            )
        for url in self.servers:
            parts = urlsplit(url)
            if parts.scheme not in _SCHEMES or not parts.hostname:
                raise InvalidArgument(
                    f"--jetstream {redacted(url)!r}: give nats://HOST:PORT or tls://HOST:PORT",
                    field="jetstream",
                )
        if not _TOKEN.match(self.prefix):
            raise InvalidArgument(
                "--jetstream-prefix: 1–32 characters of letters, digits, - and _",
                field="jetstream_prefix",
            )
        if not 1 <= self.partitions <= 1024:
            raise InvalidArgument("--jetstream-partitions: 1–1024", field="jetstream_partitions")
        if self.ack_wait_s <= 0 or self.max_deliver == 0 or self.max_deliver < -1:
            raise InvalidArgument(
                "--jetstream-ack-wait must be positive and --jetstream-max-deliver -1 "
                "(unbounded) or at least 1",
                field="jetstream_ack_wait",
            )
        if self.replicas not in (1, 3, 5):
            raise InvalidArgument("--jetstream-replicas: 1, 3 or 5", field="jetstream_replicas")
        for path, name in ((self.creds, "creds"), (self.ca, "ca")):
            if path is not None and not path.is_file():
                raise InvalidArgument(f"--jetstream-{name} {path}: no such file", field=name)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> JetStreamOptions | None:
        """The options of the command line and environment; None when no URL is given."""
        url = getattr(args, "jetstream", None) or secret(URL_ENV)
        if not url:
            return None

        def pick(flag: str, env: str, default: str | None) -> str | None:
            value = getattr(args, flag, None)
            return str(value) if value is not None else os.environ.get(env) or default

        def number(flag: str, env: str, default: float, kind: type) -> float:
            text = pick(flag, env, None)
            if text is None:
                return default
            try:
                return kind(text)  # type: ignore[no-any-return]  # int or float
            except ValueError:
                raise InvalidArgument(
                    f"--{flag.replace('_', '-')} ({env}): {text!r} is not a number", field=flag
                ) from None

        creds = pick("jetstream_creds", "CONE_JETSTREAM_CREDS", None)
        ca = pick("jetstream_ca", "CONE_JETSTREAM_CA", None)
        options = cls(
            url=url,
            consumer=pick("jetstream_consumer", "CONE_JETSTREAM_CONSUMER", DEFAULT_CONSUMER)
            or DEFAULT_CONSUMER,
            prefix=pick("jetstream_prefix", "CONE_JETSTREAM_PREFIX", DEFAULT_PREFIX) or "",
            partitions=int(
                number("jetstream_partitions", "CONE_JETSTREAM_PARTITIONS", DEFAULT_PARTITIONS, int)
            ),
            ack_wait_s=number(
                "jetstream_ack_wait", "CONE_JETSTREAM_ACK_WAIT_S", DEFAULT_ACK_WAIT_S, float
            ),
            max_deliver=int(
                number(
                    "jetstream_max_deliver", "CONE_JETSTREAM_MAX_DELIVER", DEFAULT_MAX_DELIVER, int
                )
            ),
            replicas=int(number("jetstream_replicas", "CONE_JETSTREAM_REPLICAS", 1, int)),
            creds=Path(creds) if creds else None,
            ca=Path(ca) if ca else None,
            token=secret(TOKEN_ENV) or None,
        )
        options.check()
        return options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The JetStream bridge's flags, for `cone daemon`."""
    group = parser.add_argument_group("NATS JetStream (docs/jetstream.md)")
    group.add_argument(
        "--jetstream",
        metavar="URL",
        help=f"export the inbox to NATS JetStream and take workers' replies from it "
        f"(nats://HOST:PORT, comma-separated for a cluster; {URL_ENV}; off unless given)",
    )
    group.add_argument(
        "--jetstream-consumer",
        metavar="NAME",
        help=f"cone consumer the export reads (CONE_JETSTREAM_CONSUMER; default {DEFAULT_CONSUMER})",
    )
    group.add_argument(
        "--jetstream-prefix",
        metavar="TOKEN",
        help=f"first token of subjects and stream names (default {DEFAULT_PREFIX})",
    )
    group.add_argument(
        "--jetstream-partitions",
        metavar="N",
        help=f"inbound partitions, one worker at a time each (default {DEFAULT_PARTITIONS})",
    )
    group.add_argument(
        "--jetstream-ack-wait",
        metavar="SECONDS",
        help=f"a worker's time to ack before redelivery (default {DEFAULT_ACK_WAIT_S:g})",
    )
    group.add_argument(
        "--jetstream-max-deliver",
        metavar="N",
        help=f"deliveries of an inbound message at most, -1 unbounded (default {DEFAULT_MAX_DELIVER})",
    )
    group.add_argument(
        "--jetstream-replicas", metavar="N", help="replicas of each stream: 1, 3 or 5 (default 1)"
    )
    group.add_argument("--jetstream-creds", metavar="FILE", help="NATS creds file (JWT and nkey)")
    group.add_argument("--jetstream-ca", metavar="FILE", help="CA certificate for tls:// (PEM)")


__all__ = ["URL_ENV", "JetStreamOptions", "add_arguments", "redacted"]

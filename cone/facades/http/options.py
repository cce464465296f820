"""The HTTP front's options: `--http [HOST:]PORT` and the flags around it.

Off unless asked; loopback (127.0.0.1) unless a host is given. A non-loopback address
needs TLS (`--http-cert` and `--http-key`) or `--http-insecure`, which the daemon
then says at start.
"""

from __future__ import annotations

import argparse
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cone.errors import InvalidArgument

LOOPBACK = "127.0.0.1"


def _bind(value: str) -> tuple[str, int]:
    """`PORT`, `HOST:PORT` or `[IPV6]:PORT` → (host, port); the host defaults to loopback."""
    host, sep, port_text = value.rpartition(":")
    if not sep:
        host, port_text = LOOPBACK, value
    host = host.strip("[]") or LOOPBACK
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise InvalidArgument(
            f"--http {value!r}: give PORT or HOST:PORT (a port 0–65535; 0 picks a free one)",
            field="http",
        )
    return host, int(port_text)


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address (or `localhost`)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class HttpOptions:
    """Where and how the HTTP front listens."""

    host: str = LOOPBACK
    port: int = 0
    cert: Path | None = None
    key: Path | None = None
    insecure: bool = False
    #: Origins allowed cross-origin requests (CORS); none unless configured.
    cors_origins: tuple[str, ...] = ()
    #: Host names accepted in the Host header besides the bound address (and, on
    #: loopback, `localhost`): the names a proxy or DNS gives this front.
    host_names: tuple[str, ...] = ()

    @property
    def tls(self) -> bool:
        """Whether the front serves HTTPS."""
        return self.cert is not None

    @property
    def loopback(self) -> bool:
        """Whether the front listens on loopback only."""
        return is_loopback(self.host)

    def check(self) -> None:
        """InvalidArgument unless the combination is safe (or declared insecure)."""
        if (self.cert is None) != (self.key is None):
            raise InvalidArgument(
                "--http-cert and --http-key go together: give both", field="http_cert"
            )
        if not self.loopback and not self.tls and not self.insecure:
            raise InvalidArgument(
                f"--http {self.host}:{self.port} is not a loopback address: give "
                "--http-cert and --http-key (TLS), or --http-insecure to serve plain "
                "HTTP on the network anyway",
                field="http",
            )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> HttpOptions | None:
        """The options of the command line, or None when `--http` is not given."""
        if getattr(args, "http", None) is None:
            return None
        host, port = _bind(args.http)
        options = cls(
            host=host,
            port=port,
            cert=Path(args.http_cert) if args.http_cert else None,
            key=Path(args.http_key) if args.http_key else None,
            insecure=bool(args.http_insecure),
            cors_origins=tuple(args.http_cors_origin or ()),
            host_names=tuple(args.http_host_name or ()),
        )
        options.check()
        return options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The HTTP front's flags, for a command that hosts the core."""
    group = parser.add_argument_group("HTTP front (docs/http.md)")
    group.add_argument(
        "--http",
        metavar="[HOST:]PORT",
        help="also serve JSON-RPC, events, health and metrics over HTTP (off unless given; "
        "HOST defaults to 127.0.0.1)",
    )
    group.add_argument("--http-cert", metavar="FILE", help="TLS certificate chain (PEM)")
    group.add_argument("--http-key", metavar="FILE", help="TLS private key (PEM)")
    group.add_argument(
        "--http-insecure",
        action="store_true",
        help="allow plain HTTP on a non-loopback address (the token then crosses the network "
        "in clear)",
    )
    group.add_argument(
        "--http-cors-origin",
        action="append",
        metavar="ORIGIN",
        help="allow cross-origin requests from ORIGIN (e.g. https://app.example); repeatable",
    )
    group.add_argument(
        "--http-host-name",
        action="append",
        metavar="NAME",
        help="accept this name in the Host header too (e.g. the DNS name of a non-loopback "
        "address); repeatable",
    )


__all__ = ["LOOPBACK", "HttpOptions", "add_arguments", "is_loopback"]

"""Command-line entry point: argument parsing and dispatch to the commands, nothing else.

Command modules are imported only when their command runs, so that `cone serve` in
relay mode starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# command name -> module whose `run(args) -> int` carries it out
_COMMANDS = {
    "devnet": "cone.devnet.command",
}


def _add_devnet(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "devnet",
        help="run a local, wire-compatible XMTP node (for tests and demos)",
        description="Serve the XMTP identity and MLS node APIs that libxmtp calls, on h2c.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=5556, help="port to listen on (default 5556; 0 picks one)"
    )
    p.add_argument("--db", default=None, help="SQLite file to persist state in (default: memory)")
    p.add_argument(
        "--control",
        default=None,
        help="Unix socket path for the fault-injection control service (default: none)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The `cone` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="cone", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_devnet(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` and run the chosen command; returns the process exit code."""
    args = build_parser().parse_args(argv)
    module = importlib.import_module(_COMMANDS[args.command])
    code: int = module.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())

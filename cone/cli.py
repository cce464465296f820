"""Command-line entry point: argument parsing and dispatch to the commands, nothing else.

Command modules are imported only when their command runs, so that `cone serve` in
relay mode starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

import cone
from cone.commands import parser as command_parser
from cone.config import NETWORKS, take_secrets

# command name -> module whose `run(args) -> int` carries it out
_COMMANDS = {
    "devnet": "cone.devnet.command",
    "devnet-ctl": "cone.devnet.ctl",
    "daemon": "cone.daemon.command",
    "backup": "cone.backup.command",
    "restore": "cone.backup.command",
    "serve": "cone.facades.jsonrpc.command",
    "mcp": "cone.facades.mcp.command",
    "bridge": "cone.bridge.command",
    "demo": "cone.demo.command",
    "web": "cone.facades.http.web",
    "proto": "cone.protoset",
    **dict.fromkeys(command_parser.COMMANDS, command_parser.MODULE),
}


def _add_state(p: argparse.ArgumentParser) -> None:
    """The flags every command that hosts or reaches an identity shares."""
    p.add_argument("--home", help="state directory (default: $CONE_HOME or the XDG state dir)")
    p.add_argument(
        "--network",
        choices=list(NETWORKS),
        help="XMTP network (default: $CONE_NETWORK or local); the testnet* and mainnet "
        "ones are D14N",
    )
    p.add_argument("--api-url", help="node URL override (default: $CONE_API_URL or the network's)")
    p.add_argument(
        "--gateway-url",
        help="D14N gateway: run on XMTP's decentralized network through it (default: "
        "$CONE_GATEWAY_URL, or the network's on a D14N network; none: V3)",
    )
    p.add_argument(
        "--key-file",
        help="database key file (default: $CONE_DB_KEY, else the state directory's db.key)",
    )
    _add_logging(p)


def _add_logging(p: argparse.ArgumentParser) -> None:
    """-v/-vv, --log-file and --log-format (see cone/_logs.py)."""
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="more on stderr: -v each message in and out (ids only), call and sync; "
        "-vv also libxmtp's debug lines",
    )
    p.add_argument("--log-file", help="write the log to this file (appending) instead of stderr")
    p.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="text lines (default) or one JSON object per line",
    )


class _Version(argparse.Action):
    """`cone --version [--json]`: cone, the protocol and libxmtp; then exit."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print versions and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        import json

        from cone.engine._version import versions

        info = {"cone": cone.__version__, "protocol": cone.PROTOCOL_VERSION, **versions()}
        if "--json" in sys.argv[1:]:
            print(json.dumps(info))
        else:
            print(
                f"cone {info['cone']} (protocol {info['protocol']}; libxmtp {info['libxmtp']}, "
                f"commit {info['libxmtpCommit']}, via xmtp-bindings {info['xmtpBindings']})"
            )
        parser.exit()


def _add_daemon(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "daemon",
        help="host the identity and serve cone.sock until stopped",
        description="Own one identity: keep in step with XMTP and serve ConeService on cone.sock.",
    )
    _add_state(p)
    p.add_argument(
        "--wallet-key-file",
        help="import this wallet key (64 hex) on first start (default: $CONE_WALLET_KEY or new)",
    )
    _add_http(p)
    from cone.jetstream.options import add_arguments as add_jetstream

    add_jetstream(p)


def _add_http(p: argparse.ArgumentParser) -> None:
    """`--http` and its flags, for the commands that may host the core (docs/http.md)."""
    from cone.facades.http.options import add_arguments

    add_arguments(p)


def _add_web(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "web",
        help="print the running daemon's web console login URL",
        description="Print the login URL (with its token) of the web console the running "
        "daemon serves with --http (docs/web.md).",
    )
    p.add_argument("--home", help="state directory (default: $CONE_HOME or the XDG state dir)")
    p.add_argument("--json", action="store_true", help="print {url, loginUrl, tokenFile}")


def _add_proto(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    help_text = (
        "write cone's gRPC service as a descriptor set (cone.proto with every import) to "
        "FILE, for clients in other languages"
    )
    p = sub.add_parser(
        "proto",
        help=help_text,
        description=help_text[0].upper() + help_text[1:] + ": grpcurl -protoset, protoc "
        "--descriptor_set_in, proto-loader (docs/protocol.md).",
    )
    p.add_argument("file", metavar="FILE")


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
    state = p.add_mutually_exclusive_group()
    state.add_argument(
        "--db",
        default=None,
        help="SQLite file to keep state in (default: devnet/PORT.db in cone's XDG state dir)",
    )
    state.add_argument(
        "--ephemeral",
        action="store_true",
        help="keep state in memory only: a throwaway node (--port 0 implies it)",
    )
    p.add_argument(
        "--control",
        default=None,
        help="Unix socket path for the fault-injection control service (default: none)",
    )
    p.add_argument(
        "--cutover-at",
        default=None,
        metavar="TIME",
        help="the V3 side's cutover to D14N: now, +SECONDS, an ISO 8601 time, or Unix "
        "nanoseconds (default: none; FetchD14nCutover reports it)",
    )


def _add_devnet_ctl(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "devnet-ctl",
        help="inject faults into a running devnet (drop streams, fail calls, latency, cutover)",
        description="Call a running devnet's control socket; prints one JSON object.",
    )
    p.add_argument("--control", required=True, help="the socket given to `cone devnet --control`")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("drop-streams", help="end every open stream now with UNAVAILABLE")
    fail = actions.add_parser("fail", help="fail the next calls of a method")
    fail.add_argument("method", help="bare name (SendGroupMessages) or full gRPC path")
    fail.add_argument("--count", type=int, default=1, help="how many calls fail (default 1)")
    fail.add_argument(
        "--code", default="UNAVAILABLE", help="status name or number (default UNAVAILABLE)"
    )
    fail.add_argument("--message", default="", help="status message (default names the fault)")
    latency = actions.add_parser("latency", help="delay every later call of a method")
    latency.add_argument("method", help="bare name (QueryGroupMessages) or full gRPC path")
    latency.add_argument(
        "ms", type=int, help="milliseconds before each call is handled (0 removes)"
    )
    cutover = actions.add_parser(
        "cutover",
        aliases=["v3-cutover"],
        help="answer as XMTP's V3 node after its D14N cutover: publishes and subscriptions fail",
    )
    cutover.add_argument(
        "--at",
        default="now",
        metavar="TIME",
        help="when: now (default), +SECONDS, an ISO 8601 time, or Unix nanoseconds",
    )
    cutover.add_argument("--off", action="store_true", help="set no cutover: serve publishes")
    actions.add_parser("clear", help="remove every pending failure and latency, and the cutover")
    actions.add_parser("stats", help="calls and mean server time per method and per delivery")


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        help="JSON-RPC 2.0 on stdin/stdout (one request per line); see docs/protocol.md",
        description=(
            "Speak JSON-RPC 2.0 on stdin/stdout, relaying to the process that holds the "
            "identity, or hosting the core when none does. Closing stdin stops it."
        ),
    )
    _add_state(p)
    _add_http(p)


def _add_backup(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, help_text in (
        ("backup", "write an encrypted backup of the identity and all its state to FILE"),
        ("restore", "restore an encrypted backup FILE into an empty state directory"),
    ):
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("file", metavar="FILE")
        _add_state(p)
        p.add_argument(
            "--passphrase-file",
            help="file holding the backup passphrase (default: $CONE_BACKUP_PASSPHRASE)",
        )
        if name == "backup":
            p.add_argument("--force", action="store_true", help="replace FILE if it exists")


def _add_bridge(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "bridge",
        help="run an agent command once per turn; its stdout is the reply (docs/bridge.md)",
        description=(
            "Receive for the agent and run COMMAND once per turn (the pending messages of "
            "one conversation): the turn as JSON on stdin, the reply on stdout. Relays to "
            "the process holding the identity, or hosts it."
        ),
        usage="cone bridge [OPTIONS] -- COMMAND [ARGS...]",
    )
    _add_state(p)
    _add_http(p)
    p.add_argument("--consumer", default="bridge", help="consumer to receive as (default bridge)")
    p.add_argument("--alias", help="in groups, answer only when addressed as @ALIAS")
    p.add_argument("--concurrency", type=int, default=4, help="turns running at once (default 4)")
    p.add_argument(
        "--timeout", type=float, default=300.0, help="seconds before a command is killed (300)"
    )
    p.add_argument(
        "--max-attempts", type=int, default=5, help="attempts before a turn is parked (5)"
    )
    p.add_argument(
        "--backoff", type=float, default=1.0, help="seconds before the first retry, doubling (1)"
    )
    p.add_argument(
        "--context", type=int, default=50, help="unaddressed group messages kept per group (50)"
    )
    p.add_argument(
        "--pass-env",
        action="append",
        metavar="NAME",
        help="pass this variable to the command too (repeatable; cone's secrets never are)",
    )
    p.add_argument(
        "--reactions",
        action="store_true",
        help="let reactions start turns (in groups: reactions to the agent's own messages)",
    )
    p.add_argument("--parked", action="store_true", help="print the parked turns (JSON lines)")
    p.add_argument("agent", nargs=argparse.REMAINDER, help="the agent's command, after --")


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="a local devnet, an agent under cone bridge, and someone talking to it",
        description=(
            "With no network and no setup: start a devnet, an agent identity under "
            "`cone bridge` running an example agent, and a second identity that talks to "
            "it; print the conversation as it happens; clean up and exit."
        ),
    )
    _add_logging(p)


def _add_mcp(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "mcp",
        help="an MCP server on stdin/stdout (tools cone_receive, cone_send, ...); see docs/mcp.md",
        description=(
            "Serve MCP on stdin/stdout with the official SDK, relaying to the process that "
            "holds the identity, or hosting the core when none does. Closing stdin stops it."
        ),
    )
    _add_state(p)
    _add_http(p)


def build_parser() -> argparse.ArgumentParser:
    """The `cone` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="cone", description=cone.__doc__)
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_devnet(sub)
    _add_devnet_ctl(sub)
    _add_daemon(sub)
    _add_backup(sub)
    _add_serve(sub)
    _add_mcp(sub)
    _add_bridge(sub)
    _add_demo(sub)
    _add_web(sub)
    _add_proto(sub)
    command_parser.add_commands(sub, _add_state)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` and run the chosen command; returns the process exit code."""
    take_secrets()
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command is None and not extra:  # bare `cone`: the help (exit 0; docs/cli.md)
        parser.print_help()
        return 0
    if extra:  # a wrong flag: show the usage of the subcommand it was given to
        _subparser(parser, args.command).error(f"unrecognized arguments: {' '.join(extra)}")
    # Before any command creates anything: every file and directory cone makes is
    # owner-only, also those a start that fails half-way leaves (docs/security.md).
    os.umask(0o077)
    from cone import _logs

    _logs.remember(args)
    if _logs.OPTIONS.log_file:
        from cone import _log_file

        # Before the command makes anything: a log file it cannot write stops it here.
        failure = _log_file.check(_logs.OPTIONS.log_file)
        if failure is not None:
            print(f"cone {args.command}: {failure.message}", file=sys.stderr)
            return failure.exit_code
    module = importlib.import_module(_COMMANDS[args.command])
    code: int = module.run(args)
    return code


def entry() -> None:
    """The `cone` executable: run `main`, then leave without interpreter finalization.

    libxmtp's native threads outlive every Python object that owns them; tearing the
    interpreter down under them can abort the process (SIGABRT after a clean stop).
    Everything cone owns is closed by the time `main` returns, so the exit hooks run,
    the streams are flushed, and the process ends with `main`'s code.
    """
    import atexit
    import logging

    try:
        code = main()
    except KeyboardInterrupt:  # Ctrl-C outside a command's own handling: one line
        print("cone: interrupted", file=sys.stderr)
        code = 130
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _subparser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser:
    if name is None:
        return parser
    for action in parser._subparsers._group_actions if parser._subparsers else []:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[name]
            return found
    return parser


if __name__ == "__main__":
    entry()

"""`cone web [--json]`: print the running daemon's web console login URL again.

The daemon prints it once at start; this reads the URL the running front recorded
(`http.url` in the state directory) and the token (`http.token`), and checks that
something listens there. Exit 0 with the URL, 1 when no front is running.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from urllib.parse import urlsplit

from cone.config import resolve_home
from cone.facades.http._token import TOKEN_FILE, login_url, read_url


def _listening(url: str) -> bool:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1" if host == "0.0.0.0" else "::1"
    try:
        with socket.create_connection((host, parts.port or 80), timeout=2):
            return True
    except OSError:
        return False


def run(args: argparse.Namespace) -> int:
    """Print the login URL (or `{"url", "loginUrl", "tokenFile"}` with --json)."""
    home = resolve_home(args.home)
    url = read_url(home)
    token_file = home / TOKEN_FILE
    if url is None or not _listening(url) or not token_file.is_file():
        print(
            f"cone: no daemon serves HTTP for {home}: start one with "
            "`cone daemon --http PORT` (docs/web.md)",
            file=sys.stderr,
        )
        return 1
    login = login_url(url, token_file.read_text().strip())
    if args.json:
        print(json.dumps({"url": url, "loginUrl": login, "tokenFile": str(token_file)}))
    else:
        print(login)
    return 0


__all__ = ["run"]

"""What every `cone` command does around its work: logging on stderr, the event
loop it runs on, and ConeErrors turned into a message and an exit code once."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from cone.errors import ConeError, os_failure


def configure_logging(verbose: int, *, quiet: bool = False) -> None:
    """One log for cone and libxmtp (see cone/_logs.py): `-v` (1) each message, call
    and sync, `-vv` (2) libxmtp's debug; `quiet` hides cone's INFO lines by default."""
    from cone import _logs

    _logs.setup(int(verbose), quiet=quiet)


def run_loop(main: Coroutine[Any, Any, None], *, hosting: bool) -> None:
    """Run `main`: on uvloop when this process hosts the core (as `cone daemon`
    does), on plain asyncio when it only relays (no uvloop import, a faster start)."""
    if hosting:
        import uvloop

        from cone import _malloc

        # Before the loop and libxmtp's threads: few malloc arenas (cone/_malloc.py).
        _malloc.limit_arenas()
        uvloop.run(main)
    else:
        asyncio.run(main)


def exit_code(command: str, body: Callable[[], int | None]) -> int:
    """Run `body`; a ConeError becomes `cone COMMAND: message` and its exit code. An
    OSError that reaches here (a file or port the command uses) is one too: a full
    disk, a place that cannot be written, a port in use (`cone.errors.os_failure`);
    `-v` logs its traceback."""
    try:
        return body() or 0
    except ConeError as err:
        print(f"cone {command}: {err.message}", file=sys.stderr)
        return err.exit_code
    except OSError as exc:
        logging.getLogger("cone").debug("cone %s failed", command, exc_info=True)
        failure = os_failure(exc)
        print(f"cone {command}: {failure.message}", file=sys.stderr)
        return failure.exit_code

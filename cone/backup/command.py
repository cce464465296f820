"""`cone backup FILE` (through the core, while it runs) and `cone restore FILE` (offline).

The passphrase comes from `--passphrase-file` or `CONE_BACKUP_PASSPHRASE`, never from
the command line (it would show in the process list).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
from pathlib import Path

from cone._command import configure_logging, exit_code
from cone._fs import temporary_beside
from cone.config import Settings, secret
from cone.errors import Conflict, InvalidArgument, StateError
from cone.progress import Progress

PASSPHRASE_ENV = "CONE_BACKUP_PASSPHRASE"


def passphrase_from(args: argparse.Namespace) -> str:
    """The backup passphrase from its file or the environment."""
    if args.passphrase_file:
        text = Path(args.passphrase_file).read_text().rstrip("\n")
    else:
        text = secret(PASSPHRASE_ENV) or ""
    if not text:
        raise InvalidArgument(
            f"no backup passphrase: use --passphrase-file or set {PASSPHRASE_ENV}",
            field="passphrase",
        )
    return text


async def _backup(settings: Settings, target: Path, passphrase: str) -> str:
    from cone.client import ConeClient
    from cone.startup import reach_core

    progress = Progress(f"backup {target.name}")
    async with reach_core(settings, create=False), ConeClient(settings.paths.socket) as client:
        size = written = 0
        # A unique new file beside the target (O_EXCL, never a planted link), renamed
        # onto it when complete: the rename replaces a link at FILE, never its target.
        fd, partial = temporary_beside(target, ".partial")
        try:
            with os.fdopen(fd, "wb") as out:
                async for chunk in client.backup(passphrase):
                    if chunk.HasField("manifest"):
                        size = chunk.manifest.size_bytes
                        inbox = chunk.manifest.inbox_id
                        messages = chunk.manifest.messages
                        continue
                    out.write(chunk.data)
                    written += len(chunk.data)
                    progress(written, size)
                out.flush()
                os.fsync(out.fileno())
            if written != size:
                raise StateError("the backup stream ended early", reason="bad_backup")
            partial.rename(target)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
    return (
        f"backed up inbox {inbox} ({messages} message(s), received and sent; {size} bytes) "
        f"to {target}"
    )


def _restore(settings: Settings, source: Path, passphrase: str) -> str:
    from cone.store.backup import restore_backup
    from cone.store.keys import KEY_ENV, parse_hex_key

    extra: dict[str, bytes] = {}
    env_key = secret(KEY_ENV)
    if env_key:
        key = parse_hex_key(env_key, f"the database key from {KEY_ENV}")
    elif settings.key_file is not None and settings.key_file.exists():
        key = parse_hex_key(settings.key_file.read_text(), f"the key in {settings.key_file}")
    else:
        key = secrets.token_bytes(32)
        if settings.key_file is not None:
            raise StateError(
                f"the key file {settings.key_file} does not exist: create it first or "
                "leave --key-file out to get a new db.key in the state directory",
                reason="wrong_key",
            )
        extra["db.key"] = (key.hex() + "\n").encode()
    manifest = restore_backup(
        source,
        passphrase,
        settings.paths.home,
        key,
        progress=Progress(f"restore {source.name}"),
        extra_files=extra,
    )
    return (
        f"restored inbox {manifest.inbox_id} (installation {manifest.installation_id}, "
        f"{manifest.messages} message(s), received and sent) into {settings.paths.home}.\n"
        "Stop the original first: never run both copies. Then start the restored identity:\n"
        f"  cone daemon{start_flags(settings)}"
    )


def start_flags(settings: Settings) -> str:
    """The flags that start the identity restored into `settings` (always --home)."""
    flags = f" --home {settings.paths.home}"
    if settings.network != "local":
        flags += f" --network {settings.network}"
    from cone.config import NETWORK_URLS, NETWORKS

    if settings.api_url != NETWORK_URLS[settings.network]:
        flags += f" --api-url {settings.api_url}"
    if (
        settings.gateway_url is not None
        and settings.gateway_url != NETWORKS[settings.network].gateway
    ):
        flags += f" --gateway-url {settings.gateway_url}"
    if settings.key_file is not None:
        flags += f" --key-file {settings.key_file}"
    return flags


def run(args: argparse.Namespace) -> int:
    """Run `cone backup` or `cone restore`."""
    from cone.startup import settings_from

    configure_logging(args.verbose, quiet=True)

    def body() -> None:
        settings = settings_from(args)
        passphrase = passphrase_from(args)
        target = Path(args.file).absolute()
        if args.command == "backup" and target.exists() and not args.force:
            raise Conflict(
                f"{target} exists: choose another FILE, or pass --force to replace it",
                reason="file_exists",
            )
        if args.command == "backup":
            message = asyncio.run(_backup(settings, target, passphrase))
        else:
            message = _restore(settings, target, passphrase)
        print(message, file=sys.stderr)

    return exit_code(args.command, body)

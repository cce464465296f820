"""Files in the state directory without following symbolic links.

A link planted in the state directory (or beside a backup's target) must never make
cone write, truncate or chmod a file elsewhere: files are opened with O_NOFOLLOW,
new files are made with O_EXCL, permissions are fixed through a descriptor of the
file itself, and temporary files get unique names in their target's directory.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from cone.errors import StateError


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer can still use on the file system holding `path`."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def refuse_link(path: Path) -> None:
    """StateError(bad_permissions) when `path` is a symbolic link."""
    if path.is_symlink():
        raise StateError(
            f"{path} is a symbolic link: cone does not follow links in its state directory; "
            "replace it with the file itself",
            reason="bad_permissions",
        )


def open_nofollow(path: Path, flags: int, mode: int = 0o600) -> int:
    """`os.open` that refuses a symbolic link at `path` (StateError, bad_permissions)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            refuse_link(path)
        raise


def make_private(path: Path) -> None:
    """Make a regular file 0600; links and other kinds of file are left alone.

    The file is never opened for reading or writing: closing any descriptor of a file
    drops every POSIX lock this process holds on it, SQLite's locks on the databases
    open in it among them (cone's store, libxmtp's database). Another process opening
    such a database would then find it unused, reset its shared memory and, closing
    it, delete its write-ahead log while this process still wrote to it."""
    try:
        before = os.lstat(path)
    except OSError:
        return  # gone: nothing to fix here
    if not stat.S_ISREG(before.st_mode) or not before.st_mode & 0o077:
        return
    if not hasattr(os, "O_PATH"):  # no O_PATH (not Linux): a link's own mode, if at all
        os.chmod(path, 0o600, follow_symlinks=False)
        return
    try:
        # O_PATH: a descriptor that holds no lock and drops none when closed; with
        # O_NOFOLLOW, a link put there meanwhile is opened as the link itself.
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.chmod(f"/proc/self/fd/{fd}", 0o600)
    finally:
        os.close(fd)


def private_dir(path: Path) -> None:
    """Create `path` 0700, and any missing parent 0700 too (whatever the umask)."""
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    old = os.umask(0o077)
    try:
        for directory in reversed(missing):
            try:
                directory.mkdir(mode=0o700)
            except FileExistsError:
                pass
    finally:
        os.umask(old)


def temporary_beside(target: Path, suffix: str) -> tuple[int, Path]:
    """A new 0600 file with a unique name in `target`'s directory (O_EXCL, never a
    link), to be renamed onto `target` when complete."""
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    return fd, Path(name)

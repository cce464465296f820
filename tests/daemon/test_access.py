"""Only the owner reaches the core: new directories are private whatever the umask,
and the internal gRPC socket (no peer-credential check) sits in an owner-only directory."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from support.daemons import DaemonProcess

#: A small program another user can run to connect to a Unix socket.
PERL = "/usr/bin/perl"
#: Drops to another user in the exec'd program. subprocess's own `user=` forces a
#: plain fork, whose atfork handlers (grpc's, in this threaded test process) crashed
#: the child now and then (SIGSEGV before exec); without it subprocess uses vfork.
SETPRIV = "/usr/bin/setpriv"
CONNECT = (
    "use Socket; socket(my $s, PF_UNIX, SOCK_STREAM, 0) or die $!;"
    ' connect($s, pack_sockaddr_un($ARGV[0])) or die "connect: $!\\n";'
)
NOBODY = 65534


async def test_missing_parents_of_the_state_directory_are_made_private_under_umask_0(
    home: Path, devnet: str
) -> None:
    nested = home / "a" / "b" / "state"
    async with DaemonProcess(nested, devnet, umask=0) as d:
        assert (await d.client.identity()).protocol == 1
    for directory in (home / "a", home / "a" / "b", nested):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory


def _connect_as_nobody(path: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         PERL, "-e", CONNECT, str(path)],
        env={"PATH": "/usr/bin:/bin"}, cwd="/", capture_output=True, timeout=30,
    )  # fmt: skip


async def test_another_user_cannot_reach_the_grpc_socket_even_when_its_mode_is_loosened(
    daemon: DaemonProcess,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to run a process as another user")
    for tool in (PERL, SETPRIV):
        if not os.access(tool, os.X_OK):
            pytest.skip(f"no {tool} here to act as another user")
    (grpc_socket,) = daemon.home.rglob("*.grpc.sock")
    # An operator loosens the state directory (to share cone.sock) and the socket itself.
    daemon.home.chmod(0o711)
    grpc_socket.chmod(0o666)
    refused = _connect_as_nobody(grpc_socket)
    assert refused.returncode != 0
    assert b"Permission denied" in refused.stderr
    # The check is the directory's, not a failure of the other user to run at all:
    # the loosened cone.sock itself accepts the connection (and checks credentials).
    daemon.socket.chmod(0o666)
    assert _connect_as_nobody(daemon.socket).returncode == 0
    assert (await daemon.client.identity()).protocol == 1

"""Which libxmtp this process runs: for `cone --version` and the logs."""

from __future__ import annotations

from importlib import metadata
from typing import Final

# xmtp-bindings releases and the libxmtp release each wraps (the bindings report only
# a commit at run time).
_LIBXMTP: Final = {"0.1.8": "1.10.0"}


def versions() -> dict[str, str]:
    """`xmtpBindings`, `libxmtp` (the release, or `unknown`) and `libxmtpCommit`."""
    from xmtp_bindings import xmtpv3 as ffi

    try:
        bindings = metadata.version("xmtp-bindings")
    except metadata.PackageNotFoundError:
        bindings = "unknown"
    info = str(ffi.get_version_info())
    commit = ""
    for line in info.replace("\\n", "\n").splitlines():
        if line.startswith("Version:"):
            commit = line.split(":", 1)[1].strip()
    return {
        "xmtpBindings": bindings,
        "libxmtp": _LIBXMTP.get(bindings, "unknown"),
        "libxmtpCommit": commit,
    }

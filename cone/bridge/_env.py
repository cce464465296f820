"""The agent command's environment: an allow-list, never one of cone's secrets.

The agent runs code cone does not control and reads messages from peers; it gets what
a program needs to run (where programs and libraries are, the user, locale, time zone,
temporary directory, proxies and certificates), the variables the operator names with
`--pass-env` (its own API keys, say), and the turn's `CONE_*` variables. Nothing else
from the bridge's environment, and never the database key, the wallet key or the
backup passphrase, even when named.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from cone.config import SECRET_ENV
from cone.errors import InvalidArgument

#: Passed on when set in the bridge's environment.
ALLOWED: Final = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "TERM", "TZ", "LANG", "LANGUAGE",
        "TMPDIR", "TEMP", "TMP", "LD_LIBRARY_PATH",
        "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "NODE_PATH",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
        "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    }
)  # fmt: skip
#: Passed on by prefix: the locale (LC_ALL, LC_CTYPE, …) and the XDG base directories.
ALLOWED_PREFIXES: Final = ("LC_", "XDG_")


def check_pass_env(names: Iterable[str]) -> list[str]:
    """The `--pass-env` names, refusing cone's secrets."""
    out = []
    for name in names:
        if name in SECRET_ENV:
            raise InvalidArgument(
                f"--pass-env {name}: cone's secrets are never passed to the agent",
                field="pass-env",
            )
        out.append(name)
    return out


def agent_environment(
    base: Mapping[str, str], passed: Iterable[str], turn: Mapping[str, str]
) -> dict[str, str]:
    """The allowed part of `base`, the `passed` names, then the turn's variables."""
    wanted = set(passed)
    env = {
        name: value
        for name, value in base.items()
        if name in ALLOWED or name.startswith(ALLOWED_PREFIXES) or name in wanted
    }
    env.update(turn)
    for name in SECRET_ENV:
        env.pop(name, None)
    return env

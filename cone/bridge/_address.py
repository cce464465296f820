"""Whether a group message addresses the agent: the `@alias` rule.

A message addresses the agent when its text contains `@` followed by the alias,
compared case-insensitively, as a whole word:

- before the `@`: the start of the text, or a character that is not a letter, digit,
  `_` or `@` (so `mail@agent.com`-style text and `@@agent` do not count);
- after the alias: the end of the text, or a character that is not a letter, digit,
  `_` or `-` (so `@agents` and `@agent-2` do not address `agent`; `@agent,` and
  `@Agent.` do).

Only text content can address the agent (a reply's text counts); data never does.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Final

#: What an alias may be: a letter or digit, then letters, digits, `.`, `_`, `-`.
ALIAS_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


@cache
def _rule(alias: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w@])@{re.escape(alias)}(?![\w-])", re.IGNORECASE)


def valid_alias(alias: str) -> bool:
    """Whether `alias` is an acceptable `--alias`."""
    return re.fullmatch(ALIAS_PATTERN, alias) is not None


def addresses(text: str | None, alias: str | None) -> bool:
    """Whether `text` addresses `@alias` (False without an alias or text)."""
    if not alias or not text:
        return False
    return _rule(alias).search(text) is not None


__all__ = ["ALIAS_PATTERN", "addresses", "valid_alias"]

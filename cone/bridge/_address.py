"""Whether a group message addresses the agent: the `@alias` rule.

A message addresses the agent when its text, outside code, contains `@` followed by
the alias as a whole word, compared case-insensitively **in ASCII only**:

- the alias is ASCII (`ALIAS_PATTERN`) and matches only ASCII letters: lookalikes do
  not address the agent (the Kelvin sign for `K`, long `ſ` for `s`, dotless `ı` for
  `i`, fullwidth letters), because what a member sees as `@kiss` may not be what
  they wrote, and nothing is normalised into a match;
- before the `@`: the start of the text, or a character that is not a letter or digit
  (in any script), `_` or `@` (so `mail@agent.com`-style text and `@@agent` do not
  count);
- after the alias: the end of the text, or a character that is not a letter or digit
  (in any script), `_`, `-` or a combining mark (so `@agents`, `@agent-2` and `@agenté`
  written with a combining accent do not address `agent`; `@agent,` and `@Agent.` do);
- inside code (a fenced block of three or more backticks or tildes, or an inline span
  of backticks) nothing counts: quoting `@agent` in code is not calling it.

Only text content can address the agent (a reply's text counts); data never does.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from typing import Final

#: What an alias may be: a letter or digit, then letters, digits, `.`, `_`, `-`.
ALIAS_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"

# A fenced block runs from a line of 3+ backticks or tildes to the same fence (or the
# end); an inline span from a run of backticks to the same run.
_FENCE: Final = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)", re.M | re.S)
_SPAN: Final = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)


@cache
def _rule(alias: str) -> re.Pattern[str]:
    return re.compile(rf"@{re.escape(alias)}", re.IGNORECASE | re.ASCII)


def valid_alias(alias: str) -> bool:
    """Whether `alias` is an acceptable `--alias`."""
    return re.fullmatch(ALIAS_PATTERN, alias) is not None


def _wordish(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _outside_code(text: str) -> str:
    return _SPAN.sub(" ", _FENCE.sub("\n", text))


def addresses(text: str | None, alias: str | None) -> bool:
    """Whether `text` addresses `@alias` (False without an alias or text)."""
    if not alias or not text:
        return False
    plain = _outside_code(text)
    for match in _rule(alias).finditer(plain):
        start, end = match.span()
        before = plain[start - 1] if start else ""
        after = plain[end] if end < len(plain) else ""
        if before and (_wordish(before) or before == "@"):
            continue
        if after and (
            _wordish(after) or after == "-" or unicodedata.category(after).startswith("M")
        ):
            continue
        return True
    return False


__all__ = ["ALIAS_PATTERN", "addresses", "valid_alias"]

"""`python -m cone` is `cone`."""

from cone.cli import entry

entry()

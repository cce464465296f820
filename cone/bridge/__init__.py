"""`cone bridge`: run an agent's command once per turn and turn its output into replies.

The bridge holds the identity (or relays to the process that does), long-polls its
own consumer, forms turns (the pending messages of one conversation), runs the
command with the turn on stdin, replies with its stdout under the key
`reply:<last incoming messageId>` and acknowledges only after that. docs/bridge.md is
the reference; the modules:

- `_address`: the `@alias` rule for groups;
- `_turns`: forming turns from a batch;
- `_context`: unaddressed group messages held for the next addressed turn;
- `_agent`: running the command (stdin, environment, timeout, process group);
- `_journal`: open turns and parked turns on disk;
- `_loop`: the loop itself; `command`: the CLI.
"""

from cone.bridge._address import addresses, valid_alias
from cone.bridge._journal import Journal, read_parked
from cone.bridge._loop import Bridge, BridgeConfig

__all__ = ["Bridge", "BridgeConfig", "Journal", "addresses", "read_parked", "valid_alias"]

"""The intake: what libxmtp holds and streams, brought into cone's inbox exactly once.

`Intake` (cone/core/intake/lifecycle.py) is its one owner: it builds the pipeline's
parts and starts and stops them. The parts, in the order a message meets them:

- `ingest` reads libxmtp's database into the inbox by message id, with `arrivals`
  (what a message becomes in the store) and `committing` (the commit by id, which
  answers the `waiters`: receives waiting for news);
- `catch_up` syncs every conversation at the start and each period (`pacing`,
  `relisting`, `window_turns`), and `followups` syncs new ones again soon;
- `reconciliation` compares libxmtp's messages with what cone has read and heals
  gaps, a few conversations `at_once`.

Nothing here imports the operations or the host (tests/test_layers.py).
"""

from __future__ import annotations

from cone.core.intake.lifecycle import Intake

__all__ = ["Intake"]

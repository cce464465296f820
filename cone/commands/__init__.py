"""The operator's command line: `cone init`, `status`, `send`, `reply`, `connect`,
`requests`, `accept` and `block`, each a thin facade over one core operation."""

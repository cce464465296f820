"""The operator's command line: `cone init`, `status`, `send`, `reply`, `connect`,
`requests`, `accept`, `block` and `tail`, each a thin facade over one core operation."""

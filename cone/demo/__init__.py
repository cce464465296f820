"""`cone demo`: the whole stack on one machine, with no network and no setup.

`command` runs it; `echo_agent` is the example agent the bridge runs (see
docs/bridge.md for the turn format it reads).
"""

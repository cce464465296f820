"""`cone backup` and `cone restore`: an identity with all its state, encrypted end to end."""

"""Tests of `cone devnet`, the local XMTP node."""

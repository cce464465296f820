"""Shared test support: real libxmtp peers and MLS/XMTP wire builders."""

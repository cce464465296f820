"""`cone demo` runs to completion on its own: devnet, bridge, second identity, cleanup."""

from __future__ import annotations

import asyncio
import sys

import pytest

pytestmark = pytest.mark.e2e  # the whole demo, in a process of its own


async def test_cone_demo_runs_to_completion_and_shows_the_conversation() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cone", "demo",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    text = out.decode()
    assert proc.returncode == 0, err.decode()[-4000:]
    assert text.count("you → agent") == 5
    assert text.count("agent → you") == 6
    assert "You said: Hi! Who are you?" in text
    assert "accepts your DM" in text
    # Content both ways: a file and a reaction from you, a reaction and a file back.
    assert "you → agent    sends hello.txt (text/plain, 60 bytes)" in text
    assert "agent → you    reacts 👍 to your message" in text
    assert "agent → you    sends receipt.txt (text/plain," in text
    assert "received hello.txt (text/plain, 60 bytes)" in text
    assert "you → agent    reacts ❤️ to its answer" in text
    assert "agent → you    Thanks for the ❤️." in text
    assert text.rstrip().endswith("Done.")
    assert "ERROR" not in text  # libxmtp's logs go to stderr, not into the conversation

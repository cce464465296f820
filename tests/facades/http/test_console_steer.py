"""Steering from the web console in a real browser (the system's headless Chromium,
driven by Selenium): markdown, reactions and files reach a raw libxmtp peer once
each, even on a double click; older pages load; a hostile megabyte renders inert;
groups are made, renamed and changed; an outbox failure shows with its reason
(docs/web.md)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from cone.core import content
from cone.core.content import Outgoing
from cone.devnet import Devnet
from support.browser import (
    assert_inert,
    click,
    in_browser,
    js,
    needs_chromium,
    send_content,
    shoot,
    type_into,
    wait_js,
)
from support.http_daemon import HttpDaemon
from support.peers import Peer
from support.waiting import until

pytestmark = [pytest.mark.timeout(300), pytest.mark.browser, needs_chromium]

# The inline attachment limit (docs/messages.md, "Content both ways").
FILE_MAX_BYTES = 1_000_000
# Messages per history page in these tests (`?page=N`), so that paging shows with few.
PAGE = 5


async def _signed_in(daemon: HttpDaemon, browser: Any) -> None:
    url = f"{daemon.url}?page={PAGE}#token={daemon.token}"
    await in_browser(lambda: browser.get(url))
    await wait_js(browser, "return document.body.dataset.ready === '1'")


async def _open(browser: Any, conversation_id: str) -> None:
    selector = f'#conversations li[data-id="{conversation_id}"]'
    await wait_js(browser, f"return !!document.querySelector({selector!r})")
    await click(browser, selector)
    await wait_js(browser, "return !document.getElementById('composer').hidden")


async def _from_cone(peer: Peer, conversation_id: str, count: int) -> list[content.Decoded]:
    """The first `count` messages cone sent into the conversation, decoded, once the
    peer has them (and no more than `count`)."""

    async def arrived() -> list[content.Decoded]:
        got = [
            content.decode(m.content) for m in await peer.received(bytes.fromhex(conversation_id))
        ]
        return got if len(got) >= count else []

    got = await until(arrived)
    assert len(got) == count, [d.content_type for d in got]
    return got


def _history_ids(browser: Any) -> list[str]:
    return list(
        js(
            browser,
            "return [...document.querySelectorAll('#history > li')].map(li => li.dataset.id)",
        )
    )


async def test_console_sends_markdown_reactions_and_files_once_pages_back_and_stays_inert(
    daemon: HttpDaemon, alice: Peer, browser: Any, tmp_path: Path
) -> None:
    dm = (await daemon.result("connect", to=alice.address))["contact"]["conversationId"]
    await alice.client.conversations().sync()
    at_alice = alice.conversation(bytes.fromhex(dm))
    for i in range(PAGE + 2):
        await alice.send(at_alice, f"old {i}")

    async def ingested() -> bool:
        page = await daemon.result("messages", conversationId=dm, limit=50)
        return len(page["messages"]) == PAGE + 2

    await until(ingested)
    await _signed_in(daemon, browser)
    await _open(browser, dm)

    # The newest page first; "Load older" brings the rest, in order, above it.
    await wait_js(browser, f"return document.querySelectorAll('#history > li').length === {PAGE}")
    assert (
        await in_browser(lambda: js(browser, "return document.getElementById('older').hidden"))
        is False
    )
    await click(browser, "#older")
    await wait_js(
        browser, f"return document.querySelectorAll('#history > li').length === {PAGE + 2}"
    )
    assert await in_browser(lambda: js(browser, "return document.getElementById('older').hidden"))
    bodies = await in_browser(
        lambda: js(
            browser,
            "return [...document.querySelectorAll('#history > li .body')].map(b => b.textContent)",
        )
    )
    assert bodies == [f"old {i}" for i in range(PAGE + 2)]

    # A hostile megabyte of markdown (script, image, unclosed link brackets that make a
    # naive renderer's regular expressions quadratic) renders as inert text, and the
    # page keeps answering: the next sends below go through its buttons.
    hostile = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
    big = hostile + "[" * (1_000_000 - len(hostile))
    await send_content(at_alice, Outgoing(markdown=big))
    size = await wait_js(
        browser,
        "return [...document.querySelectorAll('#history > li .body')].map(b => b.textContent.length)"
        ".find(n => n > 900000)",
    )
    assert size == 1_000_000
    await assert_inert(browser)

    # Markdown, sent with a double click: one message at the peer, of the markdown type.
    await click(browser, "#as-markdown")
    await type_into(browser, "#text", "**bold** and `code`")
    await click(browser, "#send", double=True)
    await wait_js(browser, "return document.getElementById('send-state').textContent === 'sent'")
    (md,) = await _from_cone(alice, dm, 1)
    assert (md.content_type, md.text) == (content.MARKDOWN, "**bold** and `code`")
    assert md.send_key and md.send_key.startswith("console:")
    await wait_js(browser, "return !!document.querySelector('#history li.own .md strong')")

    # A reaction to a peer's message, double-clicked: one reaction; again: removed.
    target = (await in_browser(lambda: _history_ids(browser)))[PAGE + 1]  # "old 6"
    react = f'#history li[data-id="{target}"] button.react'
    await click(browser, react, double=True)
    await wait_js(browser, f"return document.querySelector('{react}').classList.contains('on')")
    added = (await _from_cone(alice, dm, 2))[1]
    assert added.reaction is not None
    assert (added.reaction.message_id, added.reaction.emoji, added.reaction.action) == (
        target,
        "👍",
        "added",
    )
    marks = f'#history li[data-id="{target}"] .reactions'
    assert (
        await in_browser(
            lambda: js(browser, f"return document.querySelector('{marks}').textContent")
        )
        == "👍 you"
    )
    await click(browser, react)
    await wait_js(browser, f"return !document.querySelector('{react}').classList.contains('on')")
    removed = (await _from_cone(alice, dm, 3))[2]
    assert removed.reaction is not None and removed.reaction.action == "removed"
    assert removed.send_key != added.send_key
    await wait_js(browser, f"return document.querySelector('{marks}').textContent === ''")

    # A file over the limit is refused in the page, before any call.
    too_big = tmp_path / "too-big.bin"
    too_big.write_bytes(b"\0" * (FILE_MAX_BYTES + 1))
    await in_browser(lambda: browser.find_element("id", "file").send_keys(str(too_big)))
    await click(browser, "#send-file")
    state = await wait_js(browser, "return document.getElementById('send-state').textContent")
    assert state == f"too-big.bin is {FILE_MAX_BYTES + 1} bytes: files are at most {FILE_MAX_BYTES}"

    # A file, sent with a double click: one attachment with its exact bytes.
    payload = bytes(range(256)) * 300
    path = tmp_path / "report.bin"
    path.write_bytes(payload)
    await in_browser(lambda: browser.find_element("id", "file").send_keys(str(path)))
    await click(browser, "#send-file", double=True)
    await wait_js(browser, "return document.getElementById('send-state').textContent === 'sent'")
    sent = (await _from_cone(alice, dm, 4))[3]
    (part,) = sent.attachments
    assert (part.filename, part.data) == ("report.bin", payload)
    await wait_js(
        browser,
        "return [...document.querySelectorAll('#history li.own a.file')].some(a => a.textContent.includes('report.bin'))",
    )

    # Nothing more reached the peer, and cone's history agrees: four sends, one each.
    assert len(await _from_cone(alice, dm, 4)) == 4
    own = [
        m
        for m in (await daemon.result("messages", conversationId=dm, limit=50))["messages"]
        if m.get("own")
    ]
    assert len(own) == 4
    assert sorted(m["contentType"] for m in own) == sorted(
        [content.MARKDOWN, content.REACTION, content.REACTION, content.ATTACHMENT]
    )


@pytest.mark.slow
async def test_console_makes_and_changes_a_group_and_shows_an_outbox_failure(
    daemon: HttpDaemon, alice: Peer, devnet: str, devnet_node: Devnet, browser: Any, tmp_path: Path
) -> None:
    bob = await Peer.create(devnet, tmp_path, "bob")
    await _signed_in(daemon, browser)

    # Create, with a double click: one group, with alice, named.
    await click(browser, "#new-group")
    await type_into(browser, "#group-name", "ops")
    await type_into(browser, "#group-members", alice.address)
    await click(browser, "#group-create", double=True)
    await wait_js(browser, "return document.getElementById('chat-title').textContent === 'ops'")
    groups = (await daemon.result("conversations", type="group"))["conversations"]
    assert len(groups) == 1
    gid = groups[0]["conversationId"]

    async def at(peer: Peer) -> Any:
        async def welcomed() -> Any:
            await peer.client.conversations().sync()
            try:
                return peer.conversation(bytes.fromhex(gid))
            except Exception:  # not welcomed yet
                return None

        return await until(welcomed)

    group = await at(alice)
    assert group.group_name() == "ops"
    await wait_js(
        browser, f"return !!document.querySelector('#members li[data-inbox=\"{alice.inbox_id}\"]')"
    )

    async def members() -> set[str]:
        await group.sync()
        return {m.inbox_id for m in await group.list_members()}

    # Add bob, then remove him, then rename: each seen by alice's raw client.
    await type_into(browser, "#member-add", bob.address)
    await click(browser, "#member-add-button")
    await wait_js(
        browser, f"return !!document.querySelector('#members li[data-inbox=\"{bob.inbox_id}\"]')"
    )
    await until(lambda: _has(members, bob.inbox_id, True))
    await click(browser, f'#members li[data-inbox="{bob.inbox_id}"] button.remove')
    await wait_js(
        browser, f"return !document.querySelector('#members li[data-inbox=\"{bob.inbox_id}\"]')"
    )
    await until(lambda: _has(members, bob.inbox_id, False))
    await type_into(browser, "#group-rename", "ops, renamed")
    await click(browser, "#group-rename-button")
    await wait_js(
        browser, "return document.getElementById('group-state').textContent === 'renamed'"
    )

    async def renamed() -> bool:
        await group.sync()
        return bool(group.group_name() == "ops, renamed")

    await until(renamed)
    await alice.send(group, "hello, ops")
    await wait_js(
        browser,
        "return [...document.querySelectorAll('#history li')].some(li => li.textContent.includes('hello, ops'))",
    )

    # Publication fails for this group: the send waits in the outbox, and the console
    # shows it failing with its reason; once the node takes it, the outbox empties.
    devnet_node.faults.fail_group(bytes.fromhex(gid), 1000)
    await type_into(browser, "#text", "held back")
    await click(browser, "#send")
    await wait_js(browser, "return document.getElementById('send-state').textContent === 'queued'")
    reason = await wait_js(
        browser,
        "return document.querySelector('#outbox-list li.outbox.failing .reason')?.textContent",
    )
    (entry,) = (await daemon.result("status"))["outbox"]
    assert reason == entry["lastError"]
    # cone's line, not libxmtp's "[GroupError::SyncFailedToWait] …".
    assert reason == "publishing a message failed: the XMTP network did not confirm the publication"
    assert "failing" in await in_browser(
        lambda: js(browser, "return document.getElementById('outbox').textContent")
    )
    shot = shoot(browser, tmp_path, "groups.png")
    if os.environ.get("CONE_CONSOLE_SHOTS"):  # refresh docs/img/ by hand
        shutil.copy(shot, Path(os.environ["CONE_CONSOLE_SHOTS"]) / "console-groups.png")
    devnet_node.faults.clear()
    await wait_js(browser, "return !document.querySelector('#outbox-list li.outbox')", timeout=90)

    async def delivered() -> bool:
        return "held back" in [
            d.text
            for d in (content.decode(m.content) for m in await alice.received(bytes.fromhex(gid)))
        ]

    await until(delivered)

    # A group bob makes with cone and no message yet is a request that moves no inbox
    # event: the console finds it through status's request count.
    from xmtp_bindings import xmtpv3 as ffi

    me = await daemon.result("identity")
    ident = ffi.FfiIdentifier(
        identifier=me["address"], identifier_kind=bob.identifier().identifier_kind
    )
    opts = ffi.FfiCreateGroupOptions(
        permissions=None, group_name="from bob", group_image_url_square=None,
        group_description=None, custom_permission_policy_set=None,
        message_disappearing_settings=None, app_data=None,
    )  # fmt: skip
    welcome = await bob.client.conversations().create_group_by_identity([ident], opts)
    await wait_js(
        browser,
        f"return !!document.querySelector('#requests li.request[data-id=\"{welcome.id().hex()}\"]')",
    )


async def _has(members: Any, inbox_id: str, present: bool) -> bool:
    return (inbox_id in await members()) == present

"""The web console as an operator keeps it open, in a real browser (the system's
headless Chromium, driven by Selenium) against a real daemon on a devnet and raw
libxmtp peers: signing in (a login URL pasted into the sign-in tab, the sign-in
field), names instead of inbox ids, conversations by last activity with a preview,
human times, a request looked at before accepting (delivered to no consumer), the
sent message in view, markdown lists, who reacted, and every view at 1280 and 800 px
(docs/web.md; `CONE_CONSOLE_SHOTS=docs/img` keeps the screenshots)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cone.core.content import Outgoing, Reaction
from support.browser import (
    click,
    in_browser,
    js,
    needs_chromium,
    send_content,
    shoot,
    texts,
    type_into,
    wait_js,
)
from support.http_daemon import HttpDaemon
from support.peers import Peer

pytestmark = [pytest.mark.timeout(300), pytest.mark.browser, needs_chromium]

WIDTHS = (1280, 800)
LIST = "Plan:\n\n1. read the logs\n2. restart the node\n   - only if stuck\n- then tell me"
FIRST = "hi, I am bob: <b>not bold</b> [a link](https://example.org)"


async def _dm_from(peer: Peer, address: str) -> Any:
    from xmtp_bindings import xmtpv3 as ffi

    return await peer.client.conversations().find_or_create_dm_by_identity(
        ffi.FfiIdentifier(identifier=address, identifier_kind=peer.identifier().identifier_kind),
        ffi.FfiCreateDmOptions(message_disappearing_settings=None),
    )


async def _group_from(peer: Peer, name: str, *addresses: str) -> Any:
    from xmtp_bindings import xmtpv3 as ffi

    opts = ffi.FfiCreateGroupOptions(
        permissions=None, group_name=name, group_image_url_square=None,
        group_description=None, custom_permission_policy_set=None,
        message_disappearing_settings=None, app_data=None,
    )  # fmt: skip
    ids = [
        ffi.FfiIdentifier(identifier=a, identifier_kind=peer.identifier().identifier_kind)
        for a in addresses
    ]
    return await peer.client.conversations().create_group_by_identity(ids, opts)


class Shots:
    """Each view at every width, into the test's directory (and docs/img on request)."""

    def __init__(self, browser: Any, directory: Path) -> None:
        self.browser = browser
        self.directory = directory
        directory.mkdir(exist_ok=True)

    async def take(self, name: str) -> None:
        for width in WIDTHS:
            await in_browser(lambda w=width: self.browser.set_window_size(w, 860))
            # Laid out at this width: the side bar and the chat side by side, nothing
            # wider than the window.
            assert (
                await in_browser(
                    lambda: js(self.browser, "return document.documentElement.scrollWidth")
                )
                <= width
            )
            path = await in_browser(
                lambda w=width: shoot(self.browser, self.directory, f"console-{name}-{w}.png")
            )
            if os.environ.get("CONE_CONSOLE_SHOTS"):
                shutil.copy(path, Path(os.environ["CONE_CONSOLE_SHOTS"]) / path.name)
        await in_browser(lambda: self.browser.set_window_size(WIDTHS[0], 860))


def _items(selector: str) -> str:
    return f"[...document.querySelectorAll({selector!r})]"


async def test_an_operator_signs_in_reads_names_and_times_and_looks_at_requests_first(
    daemon: HttpDaemon, alice: Peer, devnet: str, browser: Any, tmp_path: Path
) -> None:
    shots = Shots(browser, tmp_path / "shots")
    me = await daemon.result("identity")
    # /favicon.ico answers without a token (a browser asks for it by itself).
    async with aiohttp.ClientSession() as session, session.get(daemon.url + "favicon.ico") as r:
        assert r.status == 200 and r.content_type == "image/svg+xml"

    # The sign-in page, then the login URL pasted into that same tab: only the
    # fragment changes (no reload), and the console signs in; the token leaves the bar.
    await in_browser(lambda: browser.get(daemon.url))
    await wait_js(browser, "return !document.getElementById('login').hidden")
    await shots.take("signin")
    await in_browser(lambda: js(browser, "window.__sameDocument = 1"))
    await in_browser(lambda: browser.get(f"{daemon.url}#token={daemon.token}"))
    await wait_js(browser, "return document.body.dataset.ready === '1'")
    assert await in_browser(lambda: js(browser, "return window.__sameDocument")) == 1
    assert "token" not in await in_browser(lambda: browser.current_url)
    # The sign-in field takes the login URL too (a new tab: nothing stored).
    await in_browser(lambda: js(browser, "sessionStorage.clear(); location.reload()"))
    await wait_js(browser, "return !document.getElementById('login').hidden")
    await type_into(browser, "#signin-token", f"{daemon.url}#token={daemon.token}\n")
    await wait_js(browser, "return document.body.dataset.ready === '1'")

    # A saved contact is shown by its name, the DM titled by it.
    contact = (await daemon.result("connect", to=alice.address, name="alice"))["contact"]
    await alice.client.conversations().sync()
    alice_dm = alice.conversation(bytes.fromhex(contact["conversationId"]))
    await alice.send(alice_dm, "morning")
    await send_content(alice_dm, Outgoing(markdown=LIST))
    alice_cid = alice_dm.id().hex()
    row = f'#conversations li[data-id="{alice_cid}"]'
    await wait_js(
        browser, f"return document.querySelector('{row} .title')?.textContent === 'alice'"
    )
    # The preview is the last message, on one line; its time reads 12:01.
    preview = await wait_js(
        browser,
        f"const p = document.querySelector('{row} .preview')?.textContent;"
        " return p && p.startsWith('Plan:') && p",
    )
    assert "\n" not in preview
    clock = await in_browser(
        lambda: js(browser, f"return document.querySelector('{row} .when').textContent")
    )
    assert len(clock) == 5 and clock[2] == ":", clock

    # A stranger's DM is a request: looked at before accepting, its first message inert.
    bob = await Peer.create(devnet, tmp_path, "bob")
    bob_dm = await _dm_from(bob, me["address"])
    await bob.send(bob_dm, FIRST)
    await bob.send(bob_dm, "second from bob")
    bob_cid = bob_dm.id().hex()
    request = f'#requests li.request[data-id="{bob_cid}"]'
    await wait_js(browser, f"return !!document.querySelector('{request}')")
    short = bob.address[:6]
    assert (
        (
            await in_browser(
                lambda: js(
                    browser, f"return document.querySelector('{request} .title').textContent"
                )
            )
        )
        .lower()
        .startswith(short.lower())
    )
    await click(browser, request)
    await wait_js(browser, "return !!document.querySelector('#request-panel .first .body')")
    first = await in_browser(lambda: texts(browser, "#request-panel .first .body"))
    assert first == [FIRST]  # the text as it is: no markup, no link
    assert (
        await in_browser(
            lambda: js(
                browser,
                "return document.querySelectorAll('#request-panel a, #request-panel b').length",
            )
        )
        == 0
    )
    assert "Request from" in await in_browser(
        lambda: js(browser, "return document.getElementById('chat-title').textContent")
    )
    # Looked at, it reached no consumer.
    delivered = (await daemon.result("receive", consumer="probe", limit=100))["messages"]
    assert delivered and not [m for m in delivered if m["conversationId"] == bob_cid]
    await shots.take("request")

    # A group request: its name, who added us, its members.
    group = await _group_from(alice, "ops room", me["address"], bob.address)
    gid = group.id().hex()
    await alice.send(group, "welcome to ops")
    greq = f'#requests li.request[data-id="{gid}"]'
    await wait_js(browser, f"return !!document.querySelector('{greq}')")
    await click(browser, greq)
    await wait_js(
        browser, "return document.querySelectorAll('#request-panel .people li').length === 3"
    )
    people = await in_browser(lambda: texts(browser, "#request-panel .people li"))
    assert "alice" in people and "you" in people
    assert "ops room" in await in_browser(
        lambda: js(browser, "return document.getElementById('chat-title').textContent")
    )
    await shots.take("group-request")

    # Accepted from the preview: it opens, with its messages, delivered now.
    await click(browser, "#request-panel button.accept")
    await wait_js(
        browser, f"return !!document.querySelector('#conversations li[data-id=\"{gid}\"].open')"
    )
    await wait_js(
        browser,
        "return "
        + _items("#history > li .body")
        + ".some(b => b.textContent === 'welcome to ops')",
    )
    # A group member's message shows its sender by name.
    assert "alice" in await in_browser(lambda: texts(browser, "#history > li .who"))

    # Last activity orders the list, live: alice writes, her DM moves to the top.
    await alice.send(alice_dm, "are you there?")
    await wait_js(
        browser,
        f"const first = document.querySelector('#conversations li.conversation');"
        f" return first?.dataset.id === {alice_cid!r}"
        " && first.querySelector('.preview').textContent === 'are you there?'",
    )

    # The DM: names, times as people read them, the type only where not text,
    # markdown lists as lists, who reacted.
    await click(browser, row)
    await wait_js(
        browser,
        "return "
        + _items("#history > li .body")
        + ".some(b => b.textContent === 'are you there?')",
    )
    assert (
        await in_browser(
            lambda: js(browser, "return document.getElementById('chat-title').textContent")
        )
        == "alice"
    )
    assert set(await in_browser(lambda: texts(browser, "#history > li .who"))) == {"alice"}
    assert (
        await in_browser(
            lambda: js(browser, "return document.querySelectorAll('#history .meta .type').length")
        )
        == 0
    )
    stamp = await in_browser(
        lambda: js(browser, "return document.querySelector('#history .when').title")
    )
    assert stamp[:2] == "20" and "UTC" in stamp  # the full stamp on hover
    items = await in_browser(lambda: texts(browser, "#history .md ol > li"))
    assert [i.split("only")[0].strip() for i in items] == ["read the logs", "restart the node"]
    assert await in_browser(lambda: texts(browser, "#history .md ol li ul > li")) == [
        "only if stuck"
    ]
    assert await in_browser(lambda: texts(browser, "#history .md > ul > li")) == ["then tell me"]
    morning = await in_browser(
        lambda: js(
            browser,
            "return "
            + _items("#history > li")
            + ".find(li => li.textContent.includes('morning')).dataset.id",
        )
    )
    await send_content(alice_dm, Outgoing(reaction=Reaction(message_id=morning, emoji="👍")))
    marks = f'#history li[data-id="{morning}"] .reactions'
    await wait_js(browser, f"return document.querySelector('{marks}').textContent === '👍 alice'")
    await click(browser, f'#history li[data-id="{morning}"] button.react')
    await wait_js(
        browser, f"return document.querySelector('{marks}').textContent === '👍 alice, you'"
    )

    await shots.take("conversation")

    # A long history, then a send: the sent message is the last one, in view.
    for i in range(25):
        await alice.send(alice_dm, f"line {i}")
    await wait_js(
        browser,
        "return " + _items("#history > li .body") + ".some(b => b.textContent === 'line 24')",
    )
    await in_browser(lambda: js(browser, "document.getElementById('history').scrollTop = 0"))
    await type_into(browser, "#text", "on it")
    await click(browser, "#send")
    await wait_js(browser, "return document.getElementById('send-state').textContent === 'sent'")
    in_view = await in_browser(
        lambda: js(
            browser,
            "const h = document.getElementById('history'), last = h.lastElementChild;"
            " const a = h.getBoundingClientRect(), b = last.getBoundingClientRect();"
            " return last.classList.contains('own') && last.textContent.includes('on it')"
            " && b.bottom <= a.bottom + 1 && b.top >= a.top",
        )
    )
    assert in_view
    # Every control says what it does in words (none is an emoji alone).
    labels = await in_browser(lambda: texts(browser, "button"))
    assert all(any(ch.isalpha() for ch in label) for label in labels), labels

    # A long name fits the side bar at 800 px: cut with an ellipsis, its time and the
    # group tag still inside the row.
    long_name = "the operations room of the night shift, with a name far too long " * 2
    group_row = f'#conversations li[data-id="{gid}"]'
    await click(browser, group_row)
    await wait_js(browser, "return !document.getElementById('group-panel').hidden")
    await type_into(browser, "#group-rename", long_name[:100])
    await click(browser, "#group-rename-button")
    await wait_js(
        browser,
        f"return document.querySelector('{group_row} .title')?.textContent.startsWith('the operations')",
    )
    await in_browser(lambda: browser.set_window_size(800, 860))
    fits = await in_browser(
        lambda: js(
            browser,
            f"const li = document.querySelector('{group_row}').getBoundingClientRect();"
            f" const inside = s => {{ const r = document.querySelector('{group_row} ' + s)"
            ".getBoundingClientRect(); return r.width > 0 && r.left >= li.left && r.right <= li.right; };"
            f" const title = document.querySelector('{group_row} .title');"
            " return inside('.tag') && inside('.when') && title.scrollWidth > title.clientWidth",
        )
    )
    assert fits

    # Blocked from its preview: the request leaves the list, the view closes, and its
    # messages were never delivered.
    await click(browser, request)
    await wait_js(browser, "return !!document.querySelector('#request-panel button.block')")
    await click(browser, "#request-panel button.block")
    await wait_js(browser, f"return !document.querySelector('{request}')")
    await wait_js(browser, "return document.getElementById('request-panel').hidden")
    delivered = (await daemon.result("receive", consumer="probe", limit=100))["messages"]
    assert not [m for m in delivered if m["conversationId"] == bob_cid]


async def test_times_read_as_people_read_them(daemon: HttpDaemon, browser: Any) -> None:
    await in_browser(lambda: browser.get(daemon.url))
    await wait_js(browser, "return !document.getElementById('login').hidden")
    answers = await in_browser(
        lambda: browser.execute_async_script(
            "const done = arguments[0];"
            "import('/console/people.js').then(({ when }) => {"
            " const now = new Date(2026, 11, 7, 15, 30);"
            " done([new Date(2026, 11, 7, 12, 1), new Date(2026, 11, 6, 18, 40),"
            "  new Date(2026, 11, 3, 9, 5), new Date(2026, 8, 2, 9, 5), new Date(2025, 0, 9, 9, 5)]"
            "  .map(d => when(d.toISOString(), now)));"
            "});"
        )
    )
    assert answers == ["12:01", "yesterday 18:40", "Thu 09:05", "2 Sep 09:05", "9 Jan 2025"]

"""The web console in a real browser: the distribution's headless Chromium, driven by
Selenium, against a real daemon on a devnet and a raw libxmtp peer (docs/web.md)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cone.facades.http import _console
from support.browser import (
    assert_inert,
    chromium,
    in_browser,
    js,
    login_url,
    needs_chromium,
    send_content,
    shoot,
    texts,
    wait_js,
)
from support.cli import cone_cli
from support.http_daemon import HttpDaemon
from support.peers import Peer
from support.waiting import until

pytestmark = pytest.mark.timeout(300)

# What a hostile peer sends: each would run script or leave the page if it were
# inserted as HTML or obeyed; every one sets window.__pwned (or leaves the page) if so.
HOSTILE_TEXT = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
HOSTILE_MARKDOWN = (
    "**bold** [click me](javascript:window.__pwned=3) [safe](https://example.org/x) "
    '<img src=x onerror="window.__pwned=4">'
)
RLO = "\u202e"
BIDI = f"invoice {RLO}fdp.exe"


@pytest.fixture
def downloads(tmp_path: Path) -> Path:
    path = tmp_path / "downloads"
    path.mkdir()
    return path


@pytest.fixture
def browser(downloads: Path) -> Iterator[Any]:
    with chromium(downloads) as driver:
        yield driver


async def _dm_to(peer: Peer, daemon: HttpDaemon) -> Any:
    from xmtp_bindings import xmtpv3 as ffi

    async with aiohttp.ClientSession() as session:
        _, answer = await daemon.rpc({"jsonrpc": "2.0", "id": 1, "method": "identity"}, session)
    address = answer["result"]["address"]
    return await peer.client.conversations().find_or_create_dm_by_identity(
        ffi.FfiIdentifier(identifier=address, identifier_kind=peer.identifier().identifier_kind),
        ffi.FfiCreateDmOptions(message_disappearing_settings=None),
    )


@pytest.mark.browser
@needs_chromium
async def test_console_logs_in_accepts_a_request_follows_live_and_replies(
    daemon: HttpDaemon, alice: Peer, browser: Any, downloads: Path, tmp_path: Path
) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir()
    login = await login_url(daemon)
    await in_browser(lambda: browser.get(login))
    await wait_js(browser, "return document.body.dataset.ready === '1'")
    # The token left the address bar (and the page's history entry).
    assert "token" not in await in_browser(lambda: browser.current_url)
    identity = await in_browser(lambda: browser.find_element("id", "identity").text)
    assert identity.startswith("0x")

    dm = await _dm_to(alice, daemon)
    await alice.send(dm, "hello from alice")
    # The request appears (the event stream says the inbox moved; nothing polls),
    # showing the peer's short address (0x1234…abcd).
    short = f"{alice.address[:6]}…{alice.address[-4:]}".lower()
    await wait_js(
        browser,
        f"return [...document.querySelectorAll('#requests li.request .title')]"
        f".some(t => t.textContent.toLowerCase() === {short!r})",
    )
    shoot(browser, shots, "request.png")
    await in_browser(
        lambda: browser.find_element("css selector", "#requests li.request button.accept").click()
    )
    await wait_js(
        browser,
        "return [...document.querySelectorAll('#history li')].some(li => li.textContent.includes('hello from alice'))",
    )
    # The next message arrives live, over the event stream.
    await alice.send(dm, "second, live")
    await wait_js(
        browser,
        "return [...document.querySelectorAll('#history li')].some(li => li.textContent.includes('second, live'))",
    )

    # A reply, a reaction and a file from the peer: quoted, under the message, a download.
    from cone.core.content import AttachmentPart, Outgoing, Reaction

    live = await wait_js(
        browser,
        "return [...document.querySelectorAll('#history li')]"
        ".find(li => li.textContent.includes('second, live'))?.dataset.id",
    )
    await send_content(dm, Outgoing(text="about that"), reply_to=live)
    await send_content(dm, Outgoing(reaction=Reaction(message_id=live, emoji="👍")))
    await send_content(
        dm, Outgoing(attachment=AttachmentPart("notes.html", "text/html", b"<script>x</script>"))
    )
    await wait_js(
        browser,
        "return [...document.querySelectorAll('#history li')].some(li => "
        "li.querySelector('.quote')?.textContent === '↪ second, live' && li.textContent.includes('about that'))",
    )
    await wait_js(
        browser,
        f"return document.querySelector('#history li[data-id=\"{live}\"] .reactions')"
        ".textContent.includes('👍')",
    )
    file_link = await wait_js(
        browser,
        "return [...document.querySelectorAll('#history a.file')].map(a => [a.textContent, a.getAttribute('href')])",
    )
    assert file_link == [["⬇ notes.html (18 B)", "#"]]
    # Clicking saves the bytes as a file; the page neither renders nor leaves.
    await in_browser(lambda: browser.find_element("css selector", "#history a.file").click())

    async def saved() -> bytes:
        path = downloads / "notes.html"
        return path.read_bytes() if path.is_file() else b""

    assert await until(saved) == b"<script>x</script>"
    assert await in_browser(lambda: js(browser, "return document.body.dataset.ready")) == "1"

    # A reply typed in the console reaches the peer; a double click sends it once.
    def type_and_double_click() -> None:
        from selenium.webdriver import ActionChains

        browser.find_element("id", "text").send_keys("hi alice, from the console")
        ActionChains(browser).double_click(browser.find_element("id", "send")).perform()

    await in_browser(type_and_double_click)
    await wait_js(browser, "return document.getElementById('send-state').textContent === 'sent'")

    async def arrived() -> list[str]:
        return [t for t in await alice.texts(dm.id()) if t == "hi alice, from the console"]

    assert await until(arrived) == ["hi alice, from the console"]
    # One logical message: the daemon's history holds one own message with the text
    # (a second send with another key would be there at once, sent or queued).
    async with aiohttp.ClientSession() as session:
        _, page = await daemon.rpc(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "messages",
                "params": {"conversationId": dm.id().hex(), "limit": 50},
            },
            session,
        )
    own = [m for m in page["result"]["messages"] if m.get("own")]
    assert [m["text"] for m in own] == ["hi alice, from the console"]
    assert own[0]["messageId"] in await in_browser(
        lambda: js(
            browser,
            "return [...document.querySelectorAll('#history li.own')].map(li => li.dataset.id)",
        )
    )
    shoot(browser, shots, "conversation.png")

    # Hostile content renders inert: no script runs, no alert, no markup, no link
    # other than http(s), bidi controls shown rather than obeyed.
    await alice.send(dm, HOSTILE_TEXT)
    await send_content(dm, Outgoing(markdown=HOSTILE_MARKDOWN))
    await alice.send(dm, BIDI)
    await wait_js(
        browser,
        "return [...document.querySelectorAll('#history li')].some(li => li.textContent.includes('fdp.exe'))",
    )
    await wait_js(browser, "return !!document.querySelector('#history .md')")
    await assert_inert(browser)
    bodies = await in_browser(lambda: texts(browser, "#history .body"))
    assert HOSTILE_TEXT in bodies  # shown as the text it is
    links = await in_browser(
        lambda: js(
            browser,
            "return [...document.querySelectorAll('#history a:not(.file)')].map(a => [a.href, a.rel, a.target, a.textContent])",
        )
    )
    assert links == [["https://example.org/x", "noopener noreferrer", "_blank", "safe"]]
    assert any("[click me](javascript:window.__pwned=3)" in b for b in bodies)
    assert any("<img src=x onerror=" in b for b in bodies)
    bidi = next(b for b in bodies if "fdp.exe" in b)
    assert RLO not in bidi and "[U+202E]" in bidi
    shoot(browser, shots, "hostile.png")
    if os.environ.get("CONE_CONSOLE_SHOTS"):  # refresh docs/img/ by hand
        shutil.copy(
            shots / "hostile.png", Path(os.environ["CONE_CONSOLE_SHOTS"]) / "console-hostile.png"
        )


async def test_cone_web_without_a_running_front_says_so(home: Path, devnet: str) -> None:
    async with HttpDaemon(home, devnet) as daemon:
        assert (home / "http.url").read_text().strip() == daemon.url
    # The stopped front removed its URL; `cone web` says none runs.
    assert not (home / "http.url").exists()
    result = await cone_cli(["web", "--home", str(home)])
    assert result.code == 1
    assert "no daemon serves HTTP" in result.err and result.out == ""


@pytest.mark.browser
@needs_chromium
async def test_console_without_the_token_loads_nothing(daemon: HttpDaemon, browser: Any) -> None:
    await in_browser(lambda: browser.get(daemon.url))
    await wait_js(browser, "return !document.getElementById('login').hidden")
    assert await in_browser(lambda: js(browser, "return document.getElementById('app').hidden"))
    assert await in_browser(lambda: texts(browser, "#conversations li, #requests li")) == []
    # A wrong token is refused and dropped (a new query string: a reload, not a hash change).
    await in_browser(lambda: browser.get(daemon.url + "?again#token=wrong"))
    await wait_js(browser, "return document.getElementById('login-error').textContent !== ''")
    assert (
        await in_browser(lambda: js(browser, "return sessionStorage.getItem('cone.token')")) is None
    )
    # The API itself refuses the page's calls without the token.
    status = await in_browser(
        lambda: browser.execute_async_script(
            "const done = arguments[0];"
            "fetch('/api/v1/rpc', {method: 'POST', headers: {'Content-Type': 'application/json'},"
            " body: JSON.stringify({jsonrpc: '2.0', id: 1, method: 'identity'})}).then(r => done(r.status));"
        )
    )
    assert status == 401


async def test_console_files_carry_a_strict_policy(daemon: HttpDaemon) -> None:
    async with aiohttp.ClientSession() as session:
        # Every file of the console's directory is served, each with its type.
        console = Path(_console.__file__).parent / "console"
        assert sorted(_console.FILES) == sorted(p.name for p in console.iterdir())
        modules = [p.stem for p in console.glob("*.js")]
        assert "app" in modules and len(modules) > 1
        for path, kind in (
            ("", "text/html"),
            *((f"console/{name}.js", "text/javascript") for name in modules),
            ("console/app.css", "text/css"),
        ):
            async with session.get(daemon.url + path) as r:
                assert r.status == 200
                assert r.headers["Content-Type"].startswith(kind)
                csp = r.headers["Content-Security-Policy"]
                assert "default-src 'none'" in csp and "script-src 'self'" in csp
                assert "unsafe-inline" not in csp
                assert r.headers["X-Content-Type-Options"] == "nosniff"
                assert r.headers["Referrer-Policy"] == "no-referrer"
        async with session.get(daemon.url + "console/../http.token") as r:
            assert r.status in (404, 401)
        async with session.get(daemon.url + "console/nope.js") as r:
            assert r.status == 404

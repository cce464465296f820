"""Peer-chosen strings outside messages in the web console (a group's name in the list
and in the conversation's title): bidi controls are shown as `[U+202E]`, as in
messages, and each such string is isolated in the layout (docs/web.md)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from support.browser import (
    click,
    in_browser,
    js,
    login_url,
    needs_chromium,
    wait_js,
)
from support.http_daemon import HttpDaemon
from support.peers import Peer
from support.waiting import until

pytestmark = pytest.mark.timeout(300)

RLO = "\u202e"
NAME = f"team {RLO}gnp.exe"


async def _named_group(peer: Peer, daemon: HttpDaemon) -> str:
    """A group `peer` makes with the daemon, named NAME, accepted; its id."""
    from xmtp_bindings import xmtpv3 as ffi

    async with aiohttp.ClientSession() as session:

        async def call(method: str, **params: Any) -> Any:
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            _, answer = await daemon.rpc(body, session)
            return answer["result"]

        options = ffi.FfiCreateGroupOptions(
            permissions=None, group_name=NAME, group_image_url_square=None,
            group_description=None, custom_permission_policy_set=None,
            message_disappearing_settings=None, app_data=None,
        )  # fmt: skip
        kind = peer.identifier().identifier_kind
        me = ffi.FfiIdentifier(identifier=(await call("identity"))["address"], identifier_kind=kind)
        group = await peer.client.conversations().create_group_by_identity([me], options)
        await peer.send(group, "hello group")
        group_id = bytes(group.id()).hex()

        async def held() -> bool:
            await call("sync")
            return any(
                r["conversationId"] == group_id for r in (await call("requests"))["requests"]
            )

        await until(held)
        assert (await call("accept", conversationId=group_id))["accepted"] is True
        return group_id


@pytest.mark.browser
@needs_chromium
async def test_a_group_name_with_bidi_controls_is_marked_and_isolated(
    daemon: HttpDaemon, alice: Peer, browser: Any
) -> None:
    group_id = await _named_group(alice, daemon)
    login = await login_url(daemon)
    await in_browser(lambda: browser.get(login))
    await wait_js(browser, "return document.body.dataset.ready === '1'")
    item = f"#conversations li[data-id='{group_id}']"
    listed = await wait_js(browser, f'return document.querySelector("{item}")?.textContent')
    assert RLO not in listed and "[U+202E]" in listed
    await click(browser, item)
    title = await wait_js(
        browser,
        "const t = document.getElementById('chat-title').textContent;"
        " return t.includes('gnp.exe') ? t : null",
    )
    assert RLO not in title and "[U+202E]" in title
    # Each peer-chosen string is its own bidi island: nothing in it reorders its
    # surroundings even if a control were to get through.
    isolation = await in_browser(
        lambda: js(
            browser,
            "return [document.getElementById('chat-title'),"
            f' document.querySelector("{item} .name")]'
            ".map(e => e && getComputedStyle(e).unicodeBidi)",
        )
    )
    assert isolation == ["isolate", "isolate"]

"""The distribution's headless Chromium driven by Selenium, for the web console's tests
(tests/facades/http/test_console*.py), and the helpers they share."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from support.cli import cone_cli
from support.http_daemon import HttpDaemon
from support.waiting import until

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="the browser test needs the system's chromium and chromedriver "
    "(Debian: apt-get install chromium chromium-driver; .ci/run installs them)",
)

T = TypeVar("T")


@contextmanager
def chromium(downloads: Path) -> Iterator[Any]:
    """A headless Chromium (the system's), with its own profile, saving downloads in
    `downloads`."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    # No sandbox: CI runs as root in a container, where Chromium's sandbox cannot start.
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1200,800",
    ):
        options.add_argument(arg)
    options.add_experimental_option(
        "prefs",
        {"download.default_directory": str(downloads), "download.prompt_for_download": False},
    )
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


async def in_browser(call: Callable[[], T]) -> T:
    """A blocking WebDriver call, off the event loop (libxmtp's callbacks keep running)."""
    return await asyncio.to_thread(call)


def js(driver: Any, script: str) -> Any:
    return driver.execute_script(script)


def texts(driver: Any, selector: str) -> list[str]:
    found = js(
        driver, f"return [...document.querySelectorAll({selector!r})].map(e => e.textContent)"
    )
    return [str(t) for t in found]


def no_alert(driver: Any) -> bool:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        alert = driver.switch_to.alert
    except NoAlertPresentException:
        return True
    return alert is None


async def assert_inert(driver: Any) -> None:
    """Hostile content on the page ran nothing: no alert, `window.__pwned` (which the
    hostile samples set if obeyed) never set, no script or image in the history."""
    assert await in_browser(lambda: no_alert(driver))
    assert await in_browser(lambda: js(driver, "return window.__pwned === undefined"))
    assert (
        await in_browser(
            lambda: js(
                driver, "return document.querySelectorAll('#history script, #history img').length"
            )
        )
        == 0
    )


async def wait_js(driver: Any, script: str, timeout: float = 60.0) -> Any:
    """The script's first truthy answer within `timeout`."""

    async def probe() -> Any:
        return await in_browser(lambda: js(driver, script))

    return await until(probe, timeout)


async def click(driver: Any, selector: str, double: bool = False) -> None:
    """Click (or double-click) the element `selector` finds."""

    def act() -> None:
        from selenium.webdriver import ActionChains

        if not double:  # found and clicked in one step: a list redrawn meanwhile is no matter
            assert js(
                driver, f"const e = document.querySelector({selector!r}); e?.click(); return !!e"
            )
            return
        ActionChains(driver).double_click(driver.find_element("css selector", selector)).perform()

    await in_browser(act)


async def type_into(driver: Any, selector: str, text: str, clear: bool = True) -> None:
    def act() -> None:
        element = driver.find_element("css selector", selector)
        if clear:
            element.clear()
        element.send_keys(text)

    await in_browser(act)


async def login_url(daemon: HttpDaemon) -> str:
    """The login URL as `cone web --json` prints it (the daemon printed it at start)."""
    result = await cone_cli(["web", "--json", "--home", str(daemon.home)])
    assert result.code == 0, result.err
    answer = result.json()
    assert answer["url"] == daemon.url
    assert answer["loginUrl"] == f"{daemon.url}#token={daemon.token}"
    # The same URL the daemon printed once at start.
    assert f"cone: web console at {answer['loginUrl']}\n" in daemon.stderr()
    return str(answer["loginUrl"])


async def send_content(conversation: Any, content: Any, reply_to: str | None = None) -> str:
    """Send cone's encoding of `content` (an Outgoing) from a raw libxmtp peer; its id."""
    from xmtp_bindings import xmtpv3 as ffi

    from cone.core.content import encode

    _, payload = encode(content=content, reply_to=reply_to)
    message_id = await conversation.send(payload, ffi.FfiSendMessageOpts(should_push=True))
    return bytes(message_id).hex()


def shoot(driver: Any, directory: Path, name: str) -> Path:
    path = directory / name
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 0
    return path

"""One quiet log: libxmtp's, SQLCipher's and grpc's lines routed through Python logging,
no ANSI codes in pipes, -v with ids never content, --log-file and --log-format json,
and `cone demo` printing only its story."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
from pathlib import Path

from cone._logs import JsonFormatter, TextFormatter, parse
from conepb.v1 import cone_pb2 as pb
from support.cli import cone_cli
from support.daemons import DaemonProcess, short_home
from support.waiting import until

# `TIME LEVEL LOGGER: MESSAGE`, the one text format (cone's and libxmtp's lines alike).
LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO |WARNING|ERROR|CRITICAL) \S+: "
)
BENIGN_NOISE = (
    "SecretReuseError",
    "already processed",
    "PoolNeedsConnection",
    "sqlcipherCodecAttach",
    "fork_posix.cc",
)


def test_native_lines_get_their_level_and_target() -> None:
    coloured = (
        "\x1b[2m2026-12-03T07:28:29.421307Z\x1b[0m \x1b[31mERROR\x1b[0m "
        "\x1b[2mxmtp_mls::groups::welcome_sync\x1b[0m\x1b[2m:\x1b[0m failed: welcome already processed"
    )
    line = parse(coloured)
    assert (line.logger, line.level) == ("libxmtp.xmtp_mls.groups.welcome_sync", logging.ERROR)
    assert line.message == "failed: welcome already processed" and line.benign()
    spans = parse("2026-12-03T07:36:49.565Z INFO sync{a=1}:publish: xmtp_mls::groups: a: b")
    assert (spans.logger, spans.message) == ("libxmtp.xmtp_mls.groups", "a: b")
    sqlcipher = parse("2026-12-03 07:28:28.759: WARN CORE sqlcipherCodecAttach: no codec")
    assert sqlcipher.logger == "sqlcipher" and sqlcipher.benign()
    glog = parse("I1203 07:28:27.660093   11400 fork_posix.cc:71] Other threads ...")
    assert (glog.logger, glog.level) == ("grpc", logging.INFO) and glog.benign()
    other = parse("thread 'tokio' panicked at src/lib.rs:1:1")
    assert (other.logger, other.level) == ("stderr", logging.WARNING) and not other.benign()


def test_text_and_json_formats() -> None:
    record = logging.LogRecord("cone.x", logging.WARNING, __file__, 1, "hi %s", ("there",), None)
    plain = TextFormatter(colour=False).format(record)
    assert LINE.match(plain) and plain.endswith("WARNING cone.x: hi there")
    assert "\x1b[" in TextFormatter(colour=True).format(record)
    doc = json.loads(JsonFormatter().format(record))
    assert doc["level"] == "WARNING" and doc["logger"] == "cone.x" and doc["message"] == "hi there"


async def test_cone_demo_prints_only_its_story_on_a_terminal() -> None:
    result = await cone_cli(["demo"], tty=True, timeout=180)
    assert result.code == 0, result.err
    assert result.err == "", result.err
    story = re.compile(
        r"^(cone demo: .*|  (agent|you) +0x[0-9a-f]{40} .*|\[ *\d+\.\ds\] .*|\s+\S.*)$"
    )
    lines = [line for line in result.out.splitlines() if line.strip()]
    strangers = [line for line in lines if not story.match(line)]
    assert strangers == [], strangers
    assert lines[-1].endswith("Done.")
    assert not any(mark in result.out for mark in BENIGN_NOISE)


class _VerboseDaemon(DaemonProcess):
    """A daemon with extra logging flags."""

    def __init__(self, home: Path, api_url: str, flags: list[str]) -> None:
        super().__init__(home, api_url)
        self.flags = flags

    def args(self) -> list[str]:
        return [*super().args(), *self.flags]


async def test_logs_have_one_format_no_ansi_in_pipes_and_v_shows_ids_never_content(
    devnet: str, tmp_path: Path
) -> None:
    log_file = tmp_path / "one.log"
    secret = "the-content-never-logged-4711"
    h1, h2 = short_home(), short_home()
    async with (
        _VerboseDaemon(
            h1, devnet, ["-v", "--log-file", str(log_file), "--log-format", "json"]
        ) as d1,
        DaemonProcess(h2, devnet) as d2,
    ):
        peer = await d2.client.identity()
        sent = await cone_cli(["send", peer.address, secret, "--home", str(h1), "-v"], tty=True)
        assert sent.code == 0, sent.err
        message_id = sent.out.split()[1]
        # -v on a command: each relayed call, on a terminal's stderr
        assert "call Send answered in" in sent.err

        def logged() -> list[dict[str, str]]:
            return [json.loads(line) for line in log_file.read_text().splitlines()]

        async def sent_logged() -> bool:
            return any(f"message out {message_id}" in r["message"] for r in logged())

        await until(sent_logged)
        # a message from the peer comes in: -v logs its id and sender, never the text
        me = await d1.client.identity()
        await d2.client.call("Send", pb.SendRequest(to=me.address, text=secret, key="back"))

        async def arrival_logged() -> bool:
            return any(r["message"].startswith("message in ") for r in logged())

        await until(arrival_logged)
        records = logged()
        assert {"time", "level", "logger", "message"} <= set(records[0])
        assert any(r["message"].startswith("synced in ") for r in records)
        assert secret not in log_file.read_text()
        # the default daemon's stderr, a file, through a stop: the one format, no ANSI,
        # no benign noise (PoolNeedsConnection comes on every shutdown)
        assert await d2.stop() == 0
        text = d2.stderr()
        assert "\x1b[" not in text
        for mark in BENIGN_NOISE:
            assert mark not in text, text
        # No libxmtp record at the default level (cone's own lines may name libxmtp).
        assert not re.search(r" libxmtp(\.\S+)?: ", text), text
        for line in text.splitlines():
            assert line.startswith("cone daemon: ") or LINE.match(line), line
        assert secret not in text


async def test_a_host_routes_native_records_and_passes_its_own_output_unchanged() -> None:
    # As the test suite routes its libxmtp peers (tests/conftest.py): fd 1 carries both.
    script = "\n".join(
        [
            "import os",
            "from cone import _logs",
            "_logs.route_native(1)",
            "os.write(1, b'tests/test_x.py ..')",  # a partial line (pytest's progress)
            "os.write(1, b'2026-12-03T15:17:26.937450Z \\x1b[31mERROR\\x1b[0m "
            "xmtp_mls::worker::disappearing_messages: Failed to delete expired "
            "messages, error: Platform(PoolNeedsConnection)\\n')",
            "os.write(1, b'2026-12-03T15:17:27.000000Z ERROR xmtp_mls::groups: it broke\\n')",
            # Coloured, at a line's start (as libxmtp writes on a terminal): dropped whole.
            "os.write(1, b'\\x1b[2m2026-12-03T15:17:28.1Z\\x1b[0m \\x1b[31mERROR\\x1b[0m "
            "\\x1b[2mxmtp_mls::worker\\x1b[0m: Platform(PoolNeedsConnection)\\n')",
            "os.write(1, b'\\x1b[32m1 passed\\x1b[0m in 1.00s\\n')",
            # A report quoting a cone log line: not a record.
            "os.write(1, b'E  x = 2026-12-03T15:23:53.997Z ERROR cone.core.outbox: y\\n')",
            "_logs._CAPTURE.drain()",
        ]
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), 30)
    lines = out.decode().splitlines()
    assert not any("PoolNeedsConnection" in line for line in lines)
    first, summary, report = lines
    assert first.startswith("tests/test_x.py ..")  # the record follows on its line
    assert LINE.match(first.removeprefix("tests/test_x.py .."))
    assert first.endswith("ERROR libxmtp.xmtp_mls.groups: it broke")
    assert summary == "\x1b[32m1 passed\x1b[0m in 1.00s"
    assert report == "E  x = 2026-12-03T15:23:53.997Z ERROR cone.core.outbox: y"


def test_a_host_keeps_cone_log_lines_it_prints_as_they_are() -> None:
    # A test's report quotes a daemon's log: not a libxmtp record, whatever it says.
    from cone._logs import _RUST_RECORD

    assert _RUST_RECORD.match("2026-12-03T15:23:53.997Z ERROR xmtp_mls::groups: it broke")
    assert _RUST_RECORD.match("2026-12-03T07:36:49.565Z INFO sync{a=1}:publish: xmtp_mls::g: b")
    assert not _RUST_RECORD.match("2026-12-03T15:23:53.997Z ERROR cone.engine.engine: x::y")


def _native_lines(verbosity: int) -> str:
    """What a cone process logs at `verbosity` for libxmtp's lines: a send's spurious
    error after the D14N cutover, its worker on a released database, and a panic."""
    return "\n".join(
        [
            "import os, sys",
            "from cone import _logs",
            f"_logs.setup({verbosity})",
            "os.write(1, b'2026-12-03T15:17:26.9Z ERROR xmtp_mls::groups::commit_log: "
            "Failed to publish commit log entries: publishing to XMTP V3 is no longer "
            "available\\n')",
            "os.write(2, b'2026-12-03T15:17:27.0Z ERROR xmtp_mls::worker::disappearing: "
            "Failed to delete expired messages, error: Platform(PoolNeedsConnection)\\n')",
            "_logs._CAPTURE.drain()",  # a pause: what follows is no continuation
            "os.write(2, b\"thread 'tokio' panicked at src/lib.rs:1:1\\n\")",
            "_logs._CAPTURE.drain()",
        ]
    )


async def _stderr_of(script: str) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stderr=asyncio.subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != "RUST_LOG"},
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(), 30)
    return err.decode()


async def test_no_libxmtp_record_reaches_the_default_log() -> None:
    default = await _stderr_of(_native_lines(0))
    assert "libxmtp" not in default and "Failed to" not in default, default
    assert "panicked" in default  # not a libxmtp record: a panic is always shown
    # -v: libxmtp's errors at DEBUG, their own level in the text; no benign noise.
    verbose = await _stderr_of(_native_lines(1))
    assert re.search(
        r"DEBUG libxmtp\.xmtp_mls\.groups\.commit_log: ERROR: Failed to publish commit", verbose
    ), verbose
    assert "PoolNeedsConnection" not in verbose
    # -vv: the benign lines too.
    assert "PoolNeedsConnection" in await _stderr_of(_native_lines(2))

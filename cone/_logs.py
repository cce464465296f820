"""One log for the whole process: cone's own lines, libxmtp's, SQLCipher's and grpc's.

xmtp-bindings 0.1.8 offers no log callback (only `enter_debug_writer`, which writes
files), and libxmtp, SQLCipher and grpc's C core write straight to file descriptors 1
and 2. So `setup()` points both descriptors at a pipe, keeps the real stdout and
stderr for Python (`sys.stdout`, `sys.stderr` and the log handler write there), and a
reader thread parses each native line and re-emits it through Python logging with its
level and target:

| source   | line looks like                                             | logger               |
| -------- | ----------------------------------------------------------- | -------------------- |
| libxmtp  | `2026-…Z ERROR xmtp_mls::groups::welcome_sync: text` (+ tab-indented continuation lines) | `libxmtp.xmtp_mls.groups.welcome_sync` |
| SQLCipher| `2026-… 07:28:28.759: WARN CORE sqlcipherCodecAttach: …`    | `sqlcipher`          |
| grpc     | `I1203 07:28:27.660093   11400 fork_posix.cc:71] …`         | `grpc`               |
| other    | anything else (a panic, an agent command's stderr)          | `stderr` (WARNING)   |

Levels (`-v` counts):

| logger                     | default                        | `-v`     | `-vv`   |
| -------------------------- | ------------------------------ | -------- | ------- |
| `cone.*`                   | INFO (ERROR for one-shot commands) | DEBUG | DEBUG |
| `libxmtp.*` (`RUST_LOG`)   | none                           | its errors, at DEBUG | all, at DEBUG |
| `grpc`, `sqlcipher`        | WARNING                        | WARNING  | DEBUG   |

No libxmtp record reaches the default log: each is logged at DEBUG with its own level
in its text (`DEBUG libxmtp.xmtp_mls.groups: ERROR: …`), since cone reports what an
operator acts on itself. libxmtp's known-benign errors on ordinary traffic (an MLS
message it has already decrypted, `SecretReuseError`; a welcome already processed;
`PoolNeedsConnection` from its workers on a released database), its repeated reports
of an unreachable node (cone reports the network's state itself) and the SQLCipher and
grpc notices show with `-vv` only. Lines that arrive in the same burst after a
record and match no record's shape are that record's continuation; libxmtp's "Api Stats" call counts are
cut off. An explicit `RUST_LOG` is respected.

Output: text lines `TIME LEVEL LOGGER: MESSAGE` (colour only when the stream is a
terminal and `NO_COLOR` is unset), or with `--log-format json` one object per line
(`time`, `level`, `logger`, `message`, and `exc` where there is one); on stderr, or
appended to `--log-file`.
"""

from __future__ import annotations

import atexit
import io
import json
import logging
import os
import re
import select
import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, TextIO

from cone.engine._errors import plain

# ---- options (set by cli.main from the command line) ------------------------------------


@dataclass
class Options:
    """The logging flags of the command line."""

    log_file: str | None = None
    log_format: str = "text"

    @classmethod
    def from_args(cls, args: Any) -> Options:
        """The flags from parsed arguments (absent ones keep their defaults)."""
        return cls(
            log_file=getattr(args, "log_file", None),
            log_format=getattr(args, "log_format", None) or "text",
        )


OPTIONS = Options()

# ---- formatting -------------------------------------------------------------------------

_COLOURS: Final = {
    "DEBUG": "\x1b[2m",
    "INFO": "\x1b[32m",
    "WARNING": "\x1b[33m",
    "ERROR": "\x1b[31m",
    "CRITICAL": "\x1b[1;31m",
}
_RESET: Final = "\x1b[0m"


def _utc(record: logging.LogRecord) -> str:
    at = datetime.fromtimestamp(record.created, UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


class TextFormatter(logging.Formatter):
    """`2026-12-03T07:28:29.421Z INFO  cone.daemon: message`, coloured on a terminal."""

    def __init__(self, colour: bool) -> None:
        super().__init__()
        self.colour = colour

    def format(self, record: logging.LogRecord) -> str:
        level = f"{record.levelname:<5}"
        if self.colour:
            level = f"{_COLOURS.get(record.levelname, '')}{level}{_RESET}"
        line = f"{_utc(record)} {level} {record.name}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message (and exc)."""

    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "time": _utc(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


# ---- native lines -----------------------------------------------------------------------

_ANSI: Final = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TRACING: Final = re.compile(
    r"^\s*\d{4}-\d\d-\d\dT[\d:.]+Z\s+(TRACE|DEBUG|INFO|WARN|ERROR)\s+(.*)$"
)
# A tracing target (`xmtp_mls::groups::welcome_sync`); spans (`name{k=v}:`) precede it.
_TARGET: Final = re.compile(r"[A-Za-z_]\w*(?:::\w+)*")
# Where a libxmtp record may start inside a line (its colour codes included).
_RECORD_AT: Final = re.compile(
    r"(?:\x1b\[[0-9;]*m)*\d{4}-\d\d-\d\dT[\d:.]+Z(?:\x1b\[[0-9;]*m)*\s+"
    r"(?:\x1b\[[0-9;]*m)*(?:TRACE|DEBUG|INFO|WARN|ERROR)\b"
)
# A libxmtp record as libxmtp writes it: a Rust target (`a::b`) after the level and spans.
_RUST_RECORD: Final = re.compile(
    r"^\s*\d{4}-\d\d-\d\dT[\d:.]+Z\s+(?:TRACE|DEBUG|INFO|WARN|ERROR)\s+"
    r"(?:\S*\{\S*:\s+)?[A-Za-z_]\w*::"
)
_SQLCIPHER: Final = re.compile(
    r"^\d{4}-\d\d-\d\d [\d:.]+: (TRACE|DEBUG|INFO|WARN|ERROR) CORE (.*)$"
)
_GLOG: Final = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+ ([\w./-]+:\d+)\] (.*)$")
_LEVELS: Final = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "I": logging.INFO,
    "W": logging.WARNING,
    "E": logging.ERROR,
    "F": logging.CRITICAL,
}
# Errors libxmtp logs on ordinary traffic that need no action (each seen on a healthy
# devnet): shown with -vv only.
BENIGN: Final = (
    "SecretReuseError",
    "Ciphertext generation out of bounds",
    "Generation is too far in the past",  # the same message decrypted again (stream and sync)
    "already processed",
    "PoolNeedsConnection",
    "Pool needs to  reconnect",
    "sqlcipherCodecAttach",
    "fork_posix.cc",
    # A port already in use: `cone devnet` says so itself in one line.
    "add_port.cc",
    # The node unreachable: cone says so itself, once (status, `network unreachable`),
    # where libxmtp repeats it on every retry of every worker.
    "tcp connect error",
    "The service is currently unavailable",
)


@dataclass
class NativeLine:
    """One parsed native log line (with its continuation lines)."""

    logger: str
    level: int
    message: str

    def benign(self) -> bool:
        """Whether this is a known-benign line (demoted to DEBUG)."""
        return any(mark in self.message for mark in BENIGN)


def _split_target(rest: str) -> tuple[str, str]:
    """(target as a logger name, message) of a tracing line after its level."""
    parts = rest.split(": ", 2)
    if len(parts) >= 2 and "::" in parts[0] and _TARGET.fullmatch(parts[0]):
        target, message = parts[0], ": ".join(parts[1:])
    elif len(parts) == 3 and _TARGET.fullmatch(parts[1]):
        target, message = parts[1], parts[2]  # spans first
    elif len(parts) >= 2 and _TARGET.fullmatch(parts[0]):
        target, message = parts[0], ": ".join(parts[1:])
    else:
        return "libxmtp", rest.strip()
    return target.replace("::", "."), message.strip()


def parse(line: str) -> NativeLine:
    """The logger, level and message of one native line (ANSI codes removed)."""
    line = _ANSI.sub("", line).rstrip("\r\n")
    if m := _TRACING.match(line):
        target, message = _split_target(m.group(2))
        return NativeLine(f"libxmtp.{target}", _LEVELS[m.group(1)], message)
    if m := _SQLCIPHER.match(line):
        return NativeLine("sqlcipher", _LEVELS[m.group(1)], m.group(2))
    if m := _GLOG.match(line):
        return NativeLine("grpc", _LEVELS[m.group(1)], f"{m.group(2)}: {m.group(3)}")
    return NativeLine("stderr", logging.WARNING, line)


#: Whether the known-benign native lines are logged (at DEBUG): with -vv only.
_NOISE = False
#: Whether libxmtp's own records are logged at DEBUG whatever their level (a cone
#: process: `setup`), or at their level (a host with libxmtp peers: `route_native`).
_LIBXMTP_AT_DEBUG = False


def emit(native: NativeLine) -> None:
    """Log a native line through Python logging, without the call counts ("Api
    Stats") libxmtp 1.10 appends to every API error. Benign lines only with -vv;
    in a cone process every libxmtp record goes at DEBUG (-v), its own level kept in
    the text: cone reports what an operator acts on itself (a failing send, the
    network's state), and a libxmtp ERROR is often no failure of cone's (after the D14N
    cutover a successful send logged `Failed to publish commit log entries`)."""
    message = plain(native.message)
    if native.benign():
        if not _NOISE:
            return
        level = logging.DEBUG
    elif _LIBXMTP_AT_DEBUG and native.logger.startswith("libxmtp"):
        level = logging.DEBUG
        message = f"{logging.getLevelName(native.level)}: {message}"
    else:
        level = native.level
    logging.getLogger(native.logger).log(level, "%s", message)


class _Capture:
    """A pipe in place of some file descriptors (fds 1 and 2 by default), read by a
    thread that logs each line; `real[fd]` is a copy of what each fd was before.

    With `passthrough` (a real fd), only native records are logged: every other line
    (a host's own output) is written there unchanged, a partial one at each pause."""

    def __init__(self, fds: tuple[int, ...] = (1, 2), passthrough: int | None = None) -> None:
        self.read_fd, write_fd = os.pipe()
        self.real = {fd: os.dup(fd) for fd in fds}
        for fd in fds:
            os.dup2(write_fd, fd)
        os.close(write_fd)
        self.passthrough = None if passthrough is None else self.real.get(passthrough, passthrough)
        self._pending: NativeLine | None = None
        self._idle = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cone-native-log", daemon=True)
        self._thread.start()

    def _flush_pending(self) -> None:
        if self._pending is not None:
            emit(self._pending)
            self._pending = None

    def _write_through(self, data: bytes) -> None:
        assert self.passthrough is not None
        self._flush_pending()
        try:
            while data:
                data = data[os.write(self.passthrough, data) :]
        except OSError:
            pass  # the reader went away (a closed pipe): nothing to show it to

    def _line(self, raw: str) -> None:
        if self.passthrough is not None:
            self._host_line(raw)
            return
        if not raw.strip():
            return
        native = parse(raw)
        if self._pending is not None and (
            raw.startswith(("\t", "  ")) or native.logger == "stderr"
        ):
            # A continuation of the record before it (libxmtp's multi-line errors
            # arrive in one burst; a pause ends the record).
            self._pending.message += " " + _ANSI.sub("", raw).strip()
            return
        self._flush_pending()
        self._pending = native

    def _host_line(self, raw: str) -> None:
        """Pass-through mode: a native record is logged, anything else is the host's.
        A libxmtp record has a Rust target (`xmtp_mls::groups`), so a cone log line
        (`… ERROR cone.core.outbox: …`, in a test's report) stays as it is; one that
        follows a host's partial line (pytest's progress dots) in the same burst is
        split off it."""
        at = None if _RECORD_AT.match(raw) else _RECORD_AT.search(raw)
        if at is not None and _RUST_RECORD.match(_ANSI.sub("", raw[at.start() :])):
            self._write_through(raw[: at.start()].encode())
            raw = raw[at.start() :]
        native = parse(raw)
        if native.logger.startswith("libxmtp") and not _RUST_RECORD.match(_ANSI.sub("", raw)):
            native = NativeLine("stderr", logging.WARNING, raw)
        if native.logger != "stderr":
            self._flush_pending()
            self._pending = native
        elif (
            self._pending is not None
            and raw.strip()
            and (raw.startswith("\t") or "Api Stats" in self._pending.message)
        ):
            self._pending.message += " " + _ANSI.sub("", raw).strip()
        else:
            self._write_through(raw.encode() + b"\n")

    def _run(self) -> None:
        buffer = b""
        while True:
            ready, _, _ = select.select([self.read_fd], [], [], 0.05)
            if not ready:
                # A pause: the record is complete (continuations come in the same burst).
                self._flush_pending()
                if self.passthrough is not None and buffer:
                    self._write_through(buffer)  # a host's partial line (progress dots)
                    buffer = b""
                self._idle.set()
                continue
            self._idle.clear()
            chunk = os.read(self.read_fd, 65536)
            if not chunk:
                self._flush_pending()
                self._idle.set()
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                self._line(raw.decode(errors="replace"))

    def drain(self, timeout: float = 0.5) -> None:
        """Wait (briefly) until what is in the pipe has been logged."""
        self._idle.clear()
        self._idle.wait(timeout)


_CAPTURE: _Capture | None = None
_CONFIGURED = False


def _text_stream(fd: int) -> TextIO:
    return io.TextIOWrapper(
        io.FileIO(fd, "w", closefd=False),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
        write_through=True,
    )


def _colour(stream: TextIO) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR")


def _capture_native() -> None:
    """Route fds 1 and 2 through the reader; Python keeps the real ones."""
    global _CAPTURE
    sys.stdout.flush()
    sys.stderr.flush()
    _CAPTURE = _Capture()
    sys.stdout = _text_stream(_CAPTURE.real[1])
    sys.stderr = _text_stream(_CAPTURE.real[2])
    atexit.register(_CAPTURE.drain)


def route_native(fd: int = 1) -> None:
    """Route the native records written to `fd` (libxmtp writes its lines to stdout)
    through the native loggers, as `setup` does for a command, and pass every other
    line through unchanged: for a host process with output of its own (the test
    suite, where libxmtp peers run in-process). Known-benign records are dropped, the
    rest is one plain line each, on what `fd` was before."""
    global _CAPTURE
    if _CAPTURE is not None:
        return
    _CAPTURE = capture = _Capture((fd,), passthrough=fd)
    stream = _text_stream(capture.real[fd])
    handler = logging.StreamHandler(stream)
    handler.setFormatter(TextFormatter(_colour(stream)))
    for name in ("libxmtp", "grpc", "sqlcipher", "stderr"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.propagate = False
        logger.setLevel(logging.WARNING)
    atexit.register(capture.drain)


def setup(verbosity: int = 0, *, quiet: bool = False, native: bool = True) -> None:
    """Configure logging for this process once (later calls do nothing).

    `quiet`: cone's own INFO and WARNING lines are hidden at the default level (one-shot
    commands, whose output is their result and says what they need: a send queued, an
    answer `stale`). `native`: capture libxmtp, SQLCipher and grpc.
    """
    global _CONFIGURED, _LIBXMTP_AT_DEBUG, _NOISE
    if _CONFIGURED:
        return
    _CONFIGURED = True
    _LIBXMTP_AT_DEBUG = True
    _NOISE = verbosity >= 2
    if "RUST_LOG" not in os.environ:
        os.environ["RUST_LOG"] = "debug" if verbosity >= 2 else "error"
    if native:
        _capture_native()
    handler: logging.Handler
    if OPTIONS.log_file:
        from cone._log_file import LogFile

        handler = LogFile(OPTIONS.log_file)  # its write failures: one line each outage
        colour = False
    else:
        handler = logging.StreamHandler(sys.stderr)
        colour = _colour(sys.stderr)
    handler.setFormatter(JsonFormatter() if OPTIONS.log_format == "json" else TextFormatter(colour))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if verbosity >= 2 else logging.WARNING)
    cone_level = logging.DEBUG if verbosity else (logging.ERROR if quiet else logging.INFO)
    logging.getLogger("cone").setLevel(cone_level)
    logging.getLogger("libxmtp").setLevel(logging.DEBUG if verbosity else logging.WARNING)
    for name in ("grpc", "sqlcipher"):
        logging.getLogger(name).setLevel(logging.DEBUG if verbosity >= 2 else logging.WARNING)


def remember(args: Any) -> None:
    """Keep the command line's --log-file and --log-format for `setup`."""
    global OPTIONS
    OPTIONS = Options.from_args(args)


__all__ = [
    "BENIGN",
    "OPTIONS",
    "JsonFormatter",
    "NativeLine",
    "Options",
    "TextFormatter",
    "emit",
    "parse",
    "remember",
    "route_native",
    "setup",
]

"""Framing: lines split on newline, long lines refused without buffering them."""

from __future__ import annotations

from collections.abc import Iterator

from cone.facades.jsonrpc import read_lines
from cone.facades.jsonrpc._framing import TOO_LONG, encode


def _reader(chunks: list[bytes]) -> Iterator[bytes]:
    yield from chunks
    while True:
        yield b""


async def _collect(chunks: list[bytes], head: bytes = b"", max_line: int = 10) -> list[object]:
    source = _reader(chunks)

    async def read(n: int) -> bytes:
        return next(source)

    return [line async for line in read_lines(read, head, max_line)]


async def test_lines_split_across_chunks_and_the_head_is_the_first_bytes() -> None:
    lines = await _collect([b"bc\nde", b"f\n\ng", b"h\n"], head=b"a")
    assert lines == [b"abc", b"def", b"", b"gh"]


async def test_a_last_line_without_newline_is_still_a_line() -> None:
    assert await _collect([b"ab\ncd"]) == [b"ab", b"cd"]


async def test_a_long_line_is_reported_once_and_skipped_to_its_end() -> None:
    lines = await _collect([b"ok\n", b"x" * 8, b"x" * 8, b"x" * 8, b"\nfine\n"])
    assert lines == [b"ok", TOO_LONG, b"fine"]


async def test_a_long_line_in_one_chunk_is_reported_once() -> None:
    assert await _collect([b"y" * 11 + b"\nz\n"]) == [TOO_LONG, b"z"]
    assert await _collect([b"y" * 10 + b"\n"]) == [b"y" * 10]


async def test_a_long_last_line_at_end_of_input_is_reported_once() -> None:
    assert await _collect([b"q" * 30]) == [TOO_LONG]


def test_encoded_answers_are_one_ascii_line() -> None:
    line = encode({"id": "é\n\ud800", "result": {"text": "日本"}})
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and line.isascii()

"""The MLS framing parser: what it reads from valid structures, and that nothing crashes it."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cone.devnet.mls_framing import (
    FramingError,
    parse_key_package,
    parse_protocol_message,
)
from support import mls as mls_bytes

group_ids = st.binary(min_size=1, max_size=300)


@given(group_id=group_ids, content_type=st.sampled_from([1, 2, 3]), epoch=st.integers(0, 2**64 - 1))
def test_a_private_message_yields_its_group_id_and_commit_flag(
    group_id: bytes, content_type: int, epoch: int
) -> None:
    parsed = parse_protocol_message(
        mls_bytes.private_message(group_id, content_type=content_type, epoch=epoch)
    )
    assert (parsed.group_id, parsed.epoch, parsed.wire_format) == (group_id, epoch, 2)
    assert parsed.is_commit == (content_type == 3)


@given(
    group_id=group_ids,
    content_type=st.sampled_from([1, 2, 3]),
    sender=st.sampled_from([1, 2, 3, 4]),
)
def test_a_public_message_yields_its_group_id_and_commit_flag(
    group_id: bytes, content_type: int, sender: int
) -> None:
    parsed = parse_protocol_message(
        mls_bytes.public_message(group_id, content_type=content_type, sender_type=sender)
    )
    assert (parsed.group_id, parsed.wire_format, parsed.is_commit) == (
        group_id,
        1,
        content_type == 3,
    )


@given(payload=st.binary(max_size=70_000))
def test_vectors_of_every_length_prefix_size_parse(payload: bytes) -> None:
    message = mls_bytes.private_message(b"g", ciphertext=payload)
    assert parse_protocol_message(message).group_id == b"g"


@given(key=st.binary(min_size=1, max_size=100))
def test_a_key_package_yields_its_leaf_signature_key(key: bytes) -> None:
    assert parse_key_package(mls_bytes.key_package(key)).installation_key == key


@given(data=st.binary(max_size=400))
@example(data=b"\x00\x01\x00\x02\xc0")  # the invalid 0b11 length prefix
@example(data=b"\x00\x01\x00\x02\x80\xff\xff\xff")  # a 4-byte length past the end
def test_arbitrary_bytes_never_crash_the_parsers(data: bytes) -> None:
    for parse in (parse_protocol_message, parse_key_package):
        try:
            parse(data)
        except FramingError:
            pass


@given(cut=st.integers(min_value=0))
def test_every_truncation_of_a_valid_message_is_a_framing_error(cut: int) -> None:
    for whole, parse in (
        (mls_bytes.private_message(b"group"), parse_protocol_message),
        (mls_bytes.key_package(bytes(32)), parse_key_package),
    ):
        with pytest.raises(FramingError):
            parse(whole[: cut % len(whole)])


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x00\x02\x00\x02", "MLS version 2"),
        (b"\x00\x01\x00\x03", "Welcome"),
        (b"\x00\x01\x00\x04", "GroupInfo"),
        (b"\x00\x01\x00\x05", "KeyPackage"),
        (b"\x00\x01\x00\x09", "unknown wire format 9"),
        (b"\x00\x01\x00\x02\xc0", "invalid prefix"),
        (b"\x00\x01\x00\x02\x00", "group id is empty"),
    ],
)
def test_framing_errors_say_what_is_wrong(data: bytes, reason: str) -> None:
    with pytest.raises(FramingError, match=reason):
        parse_protocol_message(data)

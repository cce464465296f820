"""Decoding XMTP's content types from any bytes a peer sends: never raises, keeps the
caps, marks what it cannot read. Pure logic (cone.core.content), no network."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cone.core import content
from conepb.xmtpcontent import content_pb2

_TYPES = [
    ("xmtp.org", "reaction", 1),
    ("xmtp.org", "reaction", 2),
    ("xmtp.org", "attachment", 1),
    ("xmtp.org", "transactionReference", 1),
    ("xmtp.org", "walletSendCalls", 1),
    ("coinbase.com", "actions", 1),
    ("coinbase.com", "intent", 1),
    ("xmtp.org", "remoteStaticAttachment", 1),
    ("xmtp.org", "multiRemoteStaticAttachment", 1),
]


def _envelope(kind: tuple[str, str, int], body: bytes, params: dict[str, str]) -> bytes:
    authority, type_id, major = kind
    return content_pb2.EncodedContent(
        type=content_pb2.ContentTypeId(
            authority_id=authority, type_id=type_id, version_major=major, version_minor=0
        ),
        parameters=params,
        fallback="what it is",
        content=body,
    ).SerializeToString()


def _carried(decoded: content.Decoded) -> None:
    """Everything kept can travel on every interface, within the caps."""
    texts = [decoded.text, decoded.data_json, decoded.content_json, decoded.fallback]
    for text in [*texts, decoded.unreadable]:
        if text is not None:
            text.encode("utf-8")
    for raw in (decoded.data_json, decoded.content_json):
        if raw is not None:
            json.dumps(json.loads(raw), allow_nan=False)
    if decoded.reaction is not None:
        r = decoded.reaction
        assert r.action in ("added", "removed", "unknown")
        assert r.schema in ("unicode", "shortcode", "custom", "unknown")
        for label in (r.message_id, r.emoji, r.reference_inbox_id):
            assert len(label) <= content.MAX_LABEL_CHARS
            label.encode("utf-8")
    assert len(decoded.attachments) <= content.MAX_ATTACHMENTS
    for a in decoded.attachments:
        assert len(a.filename) <= content.MAX_FILENAME_CHARS
        assert len(a.mime_type) <= content.MAX_LABEL_CHARS
        assert (a.data is None) != (a.remote is None)
        assert a.data is None or len(a.data) <= content.MAX_CONTENT_BYTES


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(_TYPES),
    st.binary(max_size=1024) | st.text(max_size=256).map(str.encode),
    st.dictionaries(
        st.sampled_from(
            ["filename", "mimeType", "contentDigest", "salt", "nonce", "secret", "scheme",
             "contentLength"]
        ),
        st.text(max_size=80),
    ),
)  # fmt: skip
def test_every_content_type_decodes_any_bytes_without_raising(
    kind: tuple[str, str, int], body: bytes, params: dict[str, str]
) -> None:
    decoded = content.decode(_envelope(kind, body, params))
    assert decoded.fallback == "what it is"
    _carried(decoded)


@pytest.mark.parametrize("length", ["²", "١٢", "12x", "-1", "9" * 19])
def test_a_remote_attachments_length_not_in_ascii_digits_is_read_as_absent(
    length: str,
) -> None:
    kind = ("xmtp.org", "remoteStaticAttachment", 1)
    url = b"https://example.com/f"
    decoded = content.decode(_envelope(kind, url, {"contentLength": length}))
    assert decoded == content.decode(_envelope(kind, url, {}))
    assert decoded.fallback == "what it is"


def test_a_reaction_v1_in_json_is_read_like_v2() -> None:
    body = json.dumps(
        {"reference": "ab12", "action": "removed", "content": "👍", "schema": "unicode"}
    ).encode()
    decoded = content.decode(_envelope(("xmtp.org", "reaction", 1), body, {}))
    assert decoded.reaction == content.Reaction("ab12", "👍", "removed", "unicode", "")


def test_a_broken_reaction_is_unreadable_with_its_fallback() -> None:
    decoded = content.decode(_envelope(("xmtp.org", "reaction", 1), b"\xff{", {}))
    assert decoded.unreadable and decoded.fallback == "what it is"
    decoded = content.decode(_envelope(("xmtp.org", "reaction", 1), b"[1, 2]", {}))
    assert decoded.unreadable == "the reaction is not a JSON object"


def test_structured_json_that_no_interface_carries_is_unreadable() -> None:
    kind = ("xmtp.org", "transactionReference", 1)
    assert content.decode(_envelope(kind, b'{"amount": NaN}', {})).unreadable
    assert content.decode(_envelope(kind, b"[" * 100 + b"]" * 100, {})).unreadable


def test_what_cone_sends_reads_back_the_same() -> None:
    for outgoing in (
        content.Outgoing(markdown="# hi"),
        content.Outgoing(reaction=content.Reaction("ab", "🎉", "removed", "shortcode")),
        content.Outgoing(attachment=content.AttachmentPart("a.png", "image/png", b"\x89PNG")),
    ):
        ctype, payload = content.encode(content=outgoing, key="k")
        decoded = content.decode(payload)
        assert (decoded.content_type, decoded.send_key) == (ctype, "k")
        assert decoded.text == outgoing.markdown
        assert decoded.reaction == outgoing.reaction
        assert decoded.attachments == ((outgoing.attachment,) if outgoing.attachment else ())
        assert decoded.fallback or outgoing.markdown

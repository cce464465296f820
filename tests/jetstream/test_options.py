"""The bridge's options and subject scheme (pure logic: no server)."""

from __future__ import annotations

import argparse
import hashlib

import pytest

from cone.errors import InvalidArgument
from cone.jetstream.options import JetStreamOptions, add_arguments, redacted
from cone.jetstream.subjects import Layout, key_token, partition_of


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_off_unless_a_url_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONE_JETSTREAM", raising=False)
    assert JetStreamOptions.from_args(_args()) is None


def test_the_flag_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONE_JETSTREAM", "nats://env:4222")
    monkeypatch.setenv("CONE_JETSTREAM_PARTITIONS", "3")
    options = JetStreamOptions.from_args(_args("--jetstream", "nats://flag:4222"))
    assert options is not None
    assert options.servers == ["nats://flag:4222"]
    assert options.partitions == 3
    options = JetStreamOptions.from_args(_args("--jetstream-partitions", "5"))
    assert options is not None and options.servers == ["nats://env:4222"]
    assert options.partitions == 5


def test_credentials_are_never_shown() -> None:
    options = JetStreamOptions(url="nats://u:secret@a:4222,tls://tok@b:4443")
    assert options.shown == "nats://a:4222,tls://b:4443"
    assert "secret" not in repr(options) and "tok" not in repr(options)
    assert redacted("nats://u:secret@h:1") == "nats://h:1"


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["--jetstream", "http://h:1"], "jetstream"),
        (["--jetstream", "nats://h:1", "--jetstream-prefix", "a.b"], "jetstream_prefix"),
        (["--jetstream", "nats://h:1", "--jetstream-partitions", "0"], "jetstream_partitions"),
        (["--jetstream", "nats://h:1", "--jetstream-partitions", "x"], "jetstream_partitions"),
        (["--jetstream", "nats://h:1", "--jetstream-replicas", "2"], "jetstream_replicas"),
        (["--jetstream", "nats://h:1", "--jetstream-creds", "/no/such/file"], "creds"),
    ],
)
def test_bad_options_are_refused_naming_the_option(argv: list[str], field: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        JetStreamOptions.from_args(_args(*argv))
    assert refused.value.field == field


def test_partitions_are_stable_and_documented() -> None:
    cid = "0123456789abcdef" * 2
    digest = hashlib.sha256(cid.encode()).digest()
    assert partition_of(cid, 8) == int.from_bytes(digest[:4], "big") % 8
    layout = Layout("cone", "ab" * 32, 8)
    assert layout.inbound(cid) == f"cone.{'ab' * 32}.in.{partition_of(cid, 8)}.{cid}"
    assert layout.outcome("reply:x.y z") == f"cone.{'ab' * 32}.outcome.{key_token('reply:x.y z')}"
    assert "." not in key_token("a.b") and " " not in key_token("a b")

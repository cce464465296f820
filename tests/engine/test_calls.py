"""The one call path into libxmtp: its errors read once, into the ConeError they mean."""

from __future__ import annotations

import threading

import pytest
from xmtp_bindings import xmtpv3 as ffi

from cone.engine._calls import Calls, answered
from cone.engine._errors import (
    group_refusal,
    is_absent,
    is_damaged_database,
    plain,
    stream_error,
    translate,
)
from cone.engine._offload import Offload
from cone.errors import (
    V3_CUTOVER,
    ConeError,
    FailedPrecondition,
    RateLimited,
    StateError,
    Unavailable,
)

STATS = "\n============ Api Stats ============\nUploadKeyPackage 1\nGetInboxIds 3\n"


@pytest.mark.parametrize(
    ("text", "kind", "reason"),
    [
        (
            "publishing to XMTP V3 is no longer available. Please upgrade your client to "
            "XMTP D14N.",
            FailedPrecondition,
            V3_CUTOVER,
        ),
        ("Storage error: database or disk is full", StateError, "storage_full"),
        ("status: ResourceExhausted, message: rate limit exceeded", RateLimited, "rate_limited"),
        ("tcp connect error: Connection refused (os error 111)", Unavailable, "sync_failed"),
    ],
)
def test_libxmtps_text_becomes_the_error_it_means(
    text: str, kind: type[ConeError], reason: str
) -> None:
    err = translate(ffi.FfiError.Error(text + STATS), "syncing", "sync_failed")

    assert type(err) is kind and err.reason == reason
    assert "Api Stats" not in err.message and "\n" not in err.message


@pytest.mark.parametrize(
    ("raw", "line"),
    [
        (
            "[GroupError::SyncFailedToWait] Group error: Sync failed to wait for intent",
            "publishing a message failed: the XMTP network did not confirm the publication",
        ),
        (
            '[ClientError::Api] api client at endpoint "/xmtp.xmtpv4.message_api.'
            "ReplicationApi/QueryEnvelopes\" has error status: 'The service is currently "
            'unavailable\', self: "tcp connect error"',
            "publishing a message failed: the XMTP node cannot be reached: no connection "
            "(ReplicationApi/QueryEnvelopes)",
        ),
        (
            '[GroupError::Api] api client at endpoint "/xmtp.mls.api.v1.MlsApi/'
            "SendGroupMessages\" has error status: 'Internal error', self: \"Invalid "
            'group message"',
            "publishing a message failed: the XMTP node answered: invalid group message "
            "(MlsApi/SendGroupMessages)",
        ),
        (
            "[GroupError::Storage] Group error: Storage error: MLS Group not found",
            "publishing a message failed: MLS Group not found",
        ),
    ],
)
def test_the_line_a_person_reads_is_cones_with_the_essential_detail(raw: str, line: str) -> None:
    err = translate(ffi.FfiError.Error(raw + STATS), "publishing a message")
    assert (err.message, err.reason) == (line, "network_unavailable")


def test_a_streams_error_reads_as_cones_line() -> None:
    raw = (
        '[SubscribeError::BoxError] api client at endpoint "/xmtp.mls.api.v1.MlsApi/'
        "SubscribeGroupMessages\" has error status: 'The service is currently unavailable', "
        'self: "the devnet is shutting down"'
    )
    assert stream_error(raw) == (
        "the stream ended: the XMTP node answered: the devnet is shutting down "
        "(MlsApi/SubscribeGroupMessages)"
    )
    assert stream_error(
        "XMTP V3 streaming is no longer available. Please upgrade your client to XMTP D14N."
    ) == ("the stream ended: the XMTP node refuses V3 clients since its cutover to D14N")


def test_plain_cuts_the_call_counts_and_folds_lines() -> None:
    assert plain("a failure\n  on two lines" + STATS) == "a failure on two lines"


def test_group_state_refusals_are_final_and_other_errors_are_not_refusals() -> None:
    inactive = group_refusal(ffi.FfiError.Error("Group error: GroupInactive"), "adding members")
    leave = group_refusal(ffi.FfiError.Error("LeaveCantProcessed"), "leaving the group")

    assert inactive is not None and inactive.reason == "not_a_member"
    assert leave is not None and leave.reason == "not_permitted"
    assert group_refusal(ffi.FfiError.Error("tcp connect error"), "adding members") is None


def test_absent_identities_and_damaged_databases_are_told_apart() -> None:
    assert is_absent(ffi.FfiError.Error("Association error: Missing identity update"))
    assert is_absent(ffi.FfiError.Error("inbox not found"))
    assert not is_absent(ffi.FfiError.Error("tcp connect error"))
    assert not is_absent(None)
    assert is_damaged_database(ffi.FfiError.Error("Storage error: file is not a database"))
    assert not is_damaged_database(ffi.FfiError.Error("Storage error: database or disk is full"))


async def test_a_failed_call_comes_back_translated_noted_and_answered(offload: Offload) -> None:
    noted: list[ConeError] = []
    calls = Calls(offload, noted=noted.append)

    def refused() -> None:
        raise ffi.FfiError.Error(
            "XMTP V3 streaming is no longer available. Please upgrade your client to XMTP D14N."
        )

    with pytest.raises(FailedPrecondition) as caught:
        await calls.call_sync(refused, 5, "opening the stream")

    assert caught.value.reason == V3_CUTOVER and noted == [caught.value]
    assert answered(caught.value)


async def test_a_refusal_reads_the_error_before_translate(offload: Offload) -> None:
    calls = Calls(offload).refusing(group_refusal)

    async def inactive() -> None:
        raise ffi.FfiError.Error("GroupInactive")

    with pytest.raises(FailedPrecondition) as caught:
        await calls.call(inactive, 5, "adding members")

    assert caught.value.reason == "not_a_member"


async def test_a_call_past_its_bound_is_unavailable_and_not_an_answer(offload: Offload) -> None:
    release = threading.Event()
    calls = Calls(offload)

    try:
        with pytest.raises(Unavailable) as caught:
            await calls.call_sync(lambda: release.wait(30), 0.2, "a stuck call")
    finally:
        release.set()

    assert not answered(caught.value)

"""An OSError at a command's edge becomes one ConeError: its reason, class and exit
code (pure mapping; the real full disks and ports are tests/commands/test_full_targets.py)."""

from __future__ import annotations

import errno

import grpc
import pytest

from cone.errors import TargetError, error_class_for, os_failure


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (errno.ENOSPC, "disk_full"),
        (errno.EDQUOT, "disk_full"),
        (errno.EACCES, "not_writable"),
        (errno.ENOENT, "not_writable"),
        (errno.EROFS, "not_writable"),
        (errno.EADDRINUSE, "address_in_use"),
        (errno.EIO, "target_error"),
    ],
)
def test_each_os_failure_has_its_reason_and_exit_code_8(code: int, reason: str) -> None:
    failure = os_failure(OSError(code, "said by the OS", "/some/file"))
    assert type(failure) is TargetError and failure.reason == reason
    assert failure.exit_code == 8 and failure.jsonrpc_code == -32008
    assert "\n" not in failure.message
    assert error_class_for(grpc.StatusCode.FAILED_PRECONDITION, reason) is TargetError


def test_the_failure_names_what_was_written_when_the_caller_knows() -> None:
    failure = os_failure(OSError(errno.ENOSPC, "No space left on device"), "the log file x.log")
    assert failure.message.startswith("the disk holding the log file x.log is full")
    unnamed = os_failure(OSError(errno.ENOSPC, "No space left on device"))
    assert unnamed.message.startswith("the disk being written is full")

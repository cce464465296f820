"""The catch-up's pacing (cone/core/intake/pacing.py): the wait after a pass."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cone.core.intake.pacing import FLOOR_S, MAX_INTERVALS, STRETCH, next_wait


def test_a_short_pass_keeps_the_interval() -> None:
    assert next_wait(30, 0.5) == 30
    assert next_wait(30, 7.4) == 30  # 4 × 7.4 s is within 30 s
    assert next_wait(0.3, FLOOR_S - 0.01) == 0.3  # a short interval set on purpose


def test_a_long_pass_stretches_the_wait_to_four_times_its_time_up_to_eight_intervals() -> None:
    assert next_wait(30, 10) == 40
    assert next_wait(30, 17) == 68
    assert next_wait(30, 120) == 240
    assert next_wait(0.3, 1.0) == 2.4  # the cap: 8 intervals


@given(
    interval=st.floats(min_value=0.01, max_value=3600),
    took=st.floats(min_value=0, max_value=36000),
)
def test_the_wait_is_bounded_and_the_catch_up_takes_at_most_a_fifth_of_the_time(
    interval: float, took: float
) -> None:
    wait = next_wait(interval, took)
    assert interval <= wait <= max(interval, MAX_INTERVALS * interval)
    if took >= FLOOR_S and STRETCH * took <= MAX_INTERVALS * interval:
        assert took / (took + wait) <= 1 / (1 + STRETCH) + 1e-9

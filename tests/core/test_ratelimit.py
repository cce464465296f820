"""The write budget (pure logic, with a fake clock)."""

from __future__ import annotations

from cone.core.ratelimit import WriteBudget


def test_the_window_refuses_past_its_limit_and_frees_slots_as_they_age() -> None:
    now = [0.0]
    budget = WriteBudget(limit=3, window_s=10, clock=lambda: now[0])
    assert [budget.take() for _ in range(3)] == [0.0, 0.0, 0.0]
    now[0] = 4.0
    assert budget.take() == 6.0
    now[0] = 10.0  # the three slots taken at 0 have aged out of the window
    assert [budget.take() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert budget.take() == 10.0

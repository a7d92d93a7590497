"""A loop failing every tick through an outage logs its traceback once, a line a minute, and
its recovery: not a traceback a tick."""

from __future__ import annotations

import logging

from collectors.failing import REMIND_SECONDS, FailureLog


def test_a_minute_and_a_half_of_failures_is_three_lines_then_one_when_it_works(caplog):
    now = [100.0]
    failures = FailureLog(logging.getLogger("test.failing"), "collector tick for door1", clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="test.failing"):
        for _ in range(90):  # a tick a second
            failures.failed(ConnectionRefusedError("connection to server at 127.0.0.1 failed\nIs it running?"))
            now[0] += 1
        failures.worked()
        failures.worked()  # working on: nothing more to say
    records = caplog.records
    assert [r.exc_info is not None for r in records] == [True, False, False]
    assert records[0].getMessage() == "collector tick for door1 failed"
    assert records[1].getMessage() == (
        f"collector tick for door1 still failing after {REMIND_SECONDS:.0f} s (61 ticks): "
        "ConnectionRefusedError: connection to server at 127.0.0.1 failed"
    )
    assert records[2].getMessage() == "collector tick for door1 works again after 90 s (90 failed ticks)"
    # A new stretch of failures starts again with its traceback.
    failures.failed(ValueError("bad config"))
    assert caplog.records[-1].exc_info is not None and caplog.records[-1].getMessage().endswith(" failed")

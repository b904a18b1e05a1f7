"""The busy window and the per-input service time the batcher's admission relies on."""

from __future__ import annotations

import threading
import time

import pytest

from service.busy_window import BACK_TO_BACK_S, BUSY_WINDOW_S, SERVICE_TIME_SMOOTHING, BusyWindow, ServiceTime


def test_busy_fraction_counts_only_the_part_of_a_span_inside_the_window() -> None:
    window = BusyWindow()
    now_s = time.perf_counter()
    window.record(now_s - 0.5, 1.0)  # 1 s ending 0.5 s ago: half of it lies in the last second
    assert window.fraction(window_s=1.0) == pytest.approx(0.5, abs=0.02)
    assert window.fraction(window_s=2.0) == pytest.approx(0.5, abs=0.02)  # 1 s of 2 s


def test_busy_fraction_is_the_mean_over_lanes_and_never_above_one() -> None:
    two = BusyWindow(lanes=2)
    now_s = time.perf_counter()
    two.record(now_s, 4.0)
    two.record(now_s, 4.0)  # two workers busy for the same 4 s: each was busy 4 s of 8
    assert two.fraction(window_s=8.0) == pytest.approx(0.5, abs=0.01)
    one = BusyWindow()
    one.record(now_s, 5.0)
    one.record(now_s, 5.0)  # overlapping spans on one lane cannot make it busier than always
    assert one.fraction(window_s=4.0) == 1.0


def test_spans_older_than_the_window_are_forgotten() -> None:
    window = BusyWindow()
    now_s = time.perf_counter()
    window.record(now_s - BUSY_WINDOW_S - 5, 1.0)
    window.record(now_s, 0.0)  # recording prunes what ended before the window
    assert window.fraction() == 0.0
    assert len(window._spans) == 1


def test_after_idle_time_only_the_compute_counts_per_input() -> None:
    clock = ServiceTime()
    clock.record_batch(t_start_s=100.0, t_end_s=100.4, inputs=4)
    assert clock.per_input_s == pytest.approx(0.1)  # the first sample is taken as it is


def test_back_to_back_batches_count_the_whole_cycle_and_are_smoothed() -> None:
    clock = ServiceTime()
    clock.record_batch(100.0, 100.4, 4)  # 0.1 s per input
    gap_s = BACK_TO_BACK_S / 2
    clock.record_batch(100.4 + gap_s, 100.8, 2)  # cycle = 0.4 s for 2 inputs = 0.2 s per input
    assert clock.per_input_s == pytest.approx(0.1 + SERVICE_TIME_SMOOTHING * (0.2 - 0.1))
    idle = ServiceTime()
    idle.record_batch(100.0, 100.4, 4)
    idle.record_batch(101.0, 101.2, 2)  # started 0.6 s after the previous end: only its 0.2 s count
    assert idle.per_input_s == pytest.approx(0.1)


def test_a_stopped_batch_moves_the_clock_but_is_no_sample() -> None:
    clock = ServiceTime()
    clock.record_batch(100.0, 100.4, 4)
    clock.record_stop(t_end_s=101.0)
    assert clock.per_input_s == pytest.approx(0.1)
    assert clock.last_end_s() == 101.0
    clock.record_batch(101.01, 101.41, 1)  # back to back with the stopped batch: the cycle from 101.0
    assert clock.per_input_s == pytest.approx(0.1 + SERVICE_TIME_SMOOTHING * (0.41 - 0.1))


def test_each_worker_thread_keeps_its_own_clock() -> None:
    clock = ServiceTime()
    clock.record_batch(100.0, 100.4, 4)
    seen: list[float] = []
    thread = threading.Thread(target=lambda: seen.append(clock.last_end_s()))
    thread.start()
    thread.join()
    assert seen == [0.0]
    assert clock.last_end_s() == 100.4

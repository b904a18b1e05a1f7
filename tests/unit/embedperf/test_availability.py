"""Availability seconds: which one-second bins of a window count as unavailable."""

from __future__ import annotations

from embedperf.availability import bin_count, bin_of, spanned_bins, unavailable_seconds


def test_a_closed_loop_step_counts_every_second_without_an_ok_answer() -> None:
    # 10 s window; ok answers in seconds 0-3 and 8-9; the users back off (send nothing) in 4-7
    assert unavailable_seconds(10, [0, 1, 1, 2, 3, 8, 9], every_bin_wanted=True) == 4


def test_a_share_of_the_traffic_counts_only_seconds_it_failed_in_or_hung_through() -> None:
    # ok in 0, 2, 5; a failure ended in 1 (no ok there): unavailable; 3 and 4 drew no request: not counted;
    # a request hung from 6.2 to 9.5, spanning bins 7 and 8 whole: both unavailable
    assert (
        unavailable_seconds(10, [0, 2, 5], failed_bins=[1], spans=[spanned_bins(1006.2, 1009.5, 1000.0, 10)])
        == 3
    )
    # a failure in a second that also had an ok answer is no outage
    assert unavailable_seconds(10, [0, 1], failed_bins=[1]) == 0


def test_bins_outside_the_window_are_ignored() -> None:
    assert unavailable_seconds(3, [-1, 5], failed_bins=[-2, 3, 7], spans=[(-4, -1), (3, 9)]) == 0
    assert unavailable_seconds(0, [], failed_bins=[0]) == 0


def test_bins_are_whole_seconds_from_the_window_start() -> None:
    assert bin_count(1000.25, 1010.25) == 10
    assert bin_count(1000.0, 1009.6) == 9  # a partial last second is not judged
    assert bin_of(1003.99, 1000.25) == 3
    assert spanned_bins(1000.5, 1003.2, 1000.0, 10) == (1, 2)  # bins 1 and 2 lie wholly inside
    assert spanned_bins(1000.5, 1001.2, 1000.0, 10)[0] > spanned_bins(1000.5, 1001.2, 1000.0, 10)[1]
    assert spanned_bins(1000.5, None, 1000.0, 10) == (1, 9)  # never answered: to the window's end

"""bench/scoring.py: the share of a gold answer a context holds, and paired figures of one context against another."""
from __future__ import annotations

import pytest

from bench import scoring


def test_gold_content_share_counts_the_gold_answers_content_words_the_context_holds():
    context = "Melanie: I carve out me-time to prioritize running, and I painted a sunrise in 2022."
    assert scoring.gold_content_share("She prioritizes running", context) == 1.0  # an inflection counts
    assert scoring.gold_content_share("painting, running and swimming", context) == pytest.approx(2 / 3)
    assert scoring.gold_content_share("In 2023", context) == 0.0  # a number must be there as it is
    assert scoring.gold_content_share("None of the above", context) is None  # stopwords only: nothing to hold


def test_paired_counts_wins_losses_and_ties_and_brackets_the_mean_difference():
    ours, theirs = [1.0, 0.5, 0.0, 0.2, 0.4], [0.0, 0.5, 0.5, 0.1, 0.4]
    # Differences 1.0, 0.0, -0.5, 0.1, 0.0: two wins, one loss, two ties, mean 0.6 / 5 = 0.12.
    pair = scoring.paired(ours, theirs, resamples=2000, seed=7)
    assert (pair["questions"], pair["wins"], pair["losses"], pair["ties"]) == (5, 2, 1, 2)
    assert pair["mean_difference"] == pytest.approx(0.12)
    low, high = pair["ci95"]
    assert -0.5 <= low < 0.12 < high <= 1.0  # resampled means lie between the smallest and largest difference
    assert pair == scoring.paired(ours, theirs, resamples=2000, seed=7)  # seeded: the same interval every run


def test_paired_interval_of_one_constant_difference_is_that_difference():
    pair = scoring.paired([0.5, 0.7, 0.9], [0.25, 0.45, 0.65])
    assert (pair["wins"], pair["losses"], pair["ties"]) == (3, 0, 0)
    assert pair["ci95"] == [pytest.approx(0.25), pytest.approx(0.25)]
    assert scoring.paired([], [])["mean_difference"] is None
    with pytest.raises(ValueError):
        scoring.paired([1.0], [1.0, 0.0])

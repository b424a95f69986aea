"""Calibration: probabilities that mean what they say, on data the calibrator never saw."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.nlp.calibration import (
    CalibrationSet,
    Calibrator,
    expected_calibration_error,
    kl_divergence,
    reliability_bins,
)

FEATURES = ("score", "noise")


def _sample(n: int, seed: int) -> tuple[list[dict], np.ndarray]:
    """A signal whose true P(correct) is a logistic function of ``score``."""
    rng = np.random.default_rng(seed)
    score = rng.normal(size=n)
    truth = 1 / (1 + np.exp(-(2.0 * score + 0.5)))
    correct = rng.uniform(size=n) < truth
    rows = [
        {"score": float(s), "noise": float(z)}
        for s, z in zip(score, rng.normal(size=n), strict=True)
    ]
    return rows, correct


def test_held_out_confidence_is_calibrated_and_monotonic():
    rows, correct = _sample(3000, seed=1)
    cal = Calibrator(FEATURES).fit(rows, correct)
    test_rows, test_correct = _sample(3000, seed=2)
    conf = cal.predict_many(test_rows)
    bins = reliability_bins(conf, test_correct, n_bins=5)
    accuracies = [b["accuracy"] for b in bins]
    assert accuracies == sorted(accuracies)  # higher confidence, higher accuracy
    assert expected_calibration_error(conf, test_correct) < 0.05
    assert abs(cal.coef[0]) > 5 * abs(cal.coef[1])  # the noise feature is ignored


def test_single_row_and_batch_agree_and_round_trip(tmp_path):
    rows, correct = _sample(500, seed=3)
    cal = Calibrator(FEATURES).fit(rows, correct)
    assert math.isclose(cal.predict(rows[0]), cal.predict_many(rows[:1])[0], rel_tol=1e-9)
    both = CalibrationSet(cal, Calibrator(FEATURES).fit(rows, ~correct), {"note": 1})
    both.save(tmp_path / "calibration.json")
    loaded = CalibrationSet.load(tmp_path / "calibration.json")
    assert math.isclose(loaded.simple.predict(rows[5]), cal.predict(rows[5]), rel_tol=1e-12)
    assert loaded.metrics == {"note": 1}


def test_one_class_gives_a_smoothed_base_rate():
    rows, _ = _sample(8, seed=4)
    cal = Calibrator(FEATURES).fit(rows, [True] * 8)
    assert cal.predict(rows[0]) == pytest.approx(0.9)  # (8 + 1) / (8 + 2)


def test_kl_divergence():
    same = [("a", 0.7), ("b", 0.2)]
    assert kl_divergence(same, same) == pytest.approx(0.0, abs=1e-9)
    close = kl_divergence([("a", 0.7), ("b", 0.2)], [("a", 0.6), ("b", 0.3)])
    far = kl_divergence([("a", 0.9), ("b", 0.05)], [("b", 0.9), ("c", 0.05)])
    assert 0 < close < far
    assert math.isfinite(kl_divergence([("a", 1.0)], [("z", 1.0)]))


@pytest.mark.slow
def test_trained_router_confidence_ranks_held_out_accuracy(trained_models_dir):
    """On the real models' cross-fitted held-out predictions, the most confident fifth is
    more often right than the least confident fifth (both routes)."""
    from fixtures_nlp import current_manifest

    calibration = current_manifest(trained_models_dir)["metrics"]["calibration"]
    for route in ("simple_bins", "complex_bins"):
        bins = calibration[route]
        assert bins[-1]["mean_confidence"] > bins[0]["mean_confidence"]
        assert bins[-1]["accuracy"] > bins[0]["accuracy"], (route, bins)

"""loaderlab.lessons.m11_checkpoint_interval, what notebook 11 computes about checkpoint intervals: the formulas against
the papers' own figures, against each other, and against the simulation (all of it well under 2 s)."""

from __future__ import annotations

import math

import pytest
from matplotlib.figure import Figure

from loaderlab.lessons import m11_checkpoint_interval as ci

MINUTE_S = 60.0
HOUR_S = 3600.0

# C << M: a one-minute write, a failure every 1,000 minutes, a 30-s restart
SMALL_C, LARGE_M, RESTART = 60.0, 60_000.0, 30.0
# the harshest case of Daly's paper: M = 15 min, R = 10 min, C = 5 min
HARSH_C, HARSH_M, HARSH_R = 5 * MINUTE_S, 15 * MINUTE_S, 10 * MINUTE_S

SIMULATED_OPTIMUM_TOLERANCE = 0.10  # of Young's interval, for C/M = 1e-3 (seeds 0-9 found it within 3.5 %)
SIMULATION_TOLERANCE = 0.02  # relative, simulation against its expectation (seeds 0-9: at most 0.5 %)


def test_young_minimises_the_first_order_waste_and_the_restart_does_not_move_it() -> None:
    young = ci.young_interval_s(SMALL_C, LARGE_M)
    assert young == pytest.approx(math.sqrt(2 * SMALL_C * LARGE_M))
    for restart in (0.0, RESTART, 10 * RESTART):
        at_young = ci.first_order_waste_fraction(young, SMALL_C, LARGE_M, restart)
        assert at_young < ci.first_order_waste_fraction(young * 0.999, SMALL_C, LARGE_M, restart)
        assert at_young < ci.first_order_waste_fraction(young * 1.001, SMALL_C, LARGE_M, restart)
    assert ci.lost_time_per_failure_s(young, RESTART) == RESTART + young / 2


@pytest.mark.parametrize(("mtbf_s", "paper_minutes", "decimals"), [(24 * HOUR_S, 117, 0), (6 * HOUR_S, 57, 0),
                                                                    (15 * MINUTE_S, 9.1, 1)])
def test_daly_reproduces_the_optima_printed_in_his_paper(mtbf_s: float, paper_minutes: float, decimals: int) -> None:
    """Daly (2006), figures 3-5: R = 10 min and C = 5 min; the model predicts 117, 57 and 9.1 min."""
    assert round(ci.daly_interval_s(5 * MINUTE_S, mtbf_s) / MINUTE_S, decimals) == paper_minutes


def test_daly_reduces_to_young_as_the_write_becomes_small_against_the_mtbf() -> None:
    gaps = []
    for ratio in (1e-2, 1e-4, 1e-6, 1e-8):
        gap = abs(ci.daly_interval_s(ratio * LARGE_M, LARGE_M) / ci.young_interval_s(ratio * LARGE_M, LARGE_M) - 1)
        assert gap <= math.sqrt(ratio / 2)
        gaps.append(gap)
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] < 1e-4
    assert ci.daly_interval_s(2 * LARGE_M, LARGE_M) == LARGE_M  # a write of 2M or more: the interval is M


def test_daly_beats_young_on_the_exact_expectation_when_the_write_is_not_small() -> None:
    waste = [ci.expected_waste_fraction(interval(HARSH_C, HARSH_M), HARSH_C, HARSH_M, HARSH_R)
             for interval in (ci.daly_interval_s, ci.young_interval_s)]
    assert waste[0] < waste[1]


@pytest.mark.parametrize("mtbf_s", [24 * HOUR_S, 6 * HOUR_S, 15 * MINUTE_S])
def test_the_exact_expectation_is_least_within_a_third_of_a_percent_of_daly(mtbf_s: float) -> None:
    """The module docstring's claim: the exact model's optimum lies within 0.3 % of Daly's estimate, in his cases."""
    daly = ci.daly_interval_s(5 * MINUTE_S, mtbf_s)
    intervals = [daly * (1 + k / 10_000) for k in range(-100, 101)]  # +-1 % in steps of 0.01 %
    waste = [ci.expected_waste_fraction(t, 5 * MINUTE_S, mtbf_s, 10 * MINUTE_S) for t in intervals]
    best = intervals[waste.index(min(waste))]
    assert 0 < waste.index(min(waste)) < len(intervals) - 1, "the optimum lies outside the grid"
    assert best == pytest.approx(daly, rel=0.003)


def test_the_first_order_model_approaches_the_exact_expectation_for_small_ratios() -> None:
    young = ci.young_interval_s(SMALL_C, LARGE_M)
    first = ci.first_order_waste_fraction(young, SMALL_C, LARGE_M, RESTART)
    exact = ci.expected_waste_fraction(young, SMALL_C, LARGE_M, RESTART)
    assert first == pytest.approx(exact, rel=0.05)
    harsh = ci.young_interval_s(HARSH_C, HARSH_M)
    assert ci.first_order_waste_fraction(harsh, HARSH_C, HARSH_M, HARSH_R) > 1  # far outside its range


@pytest.mark.parametrize(("checkpoint_s", "mtbf_s", "restart_s"),
                         [(SMALL_C, LARGE_M, RESTART), (HARSH_C, HARSH_M, HARSH_R)])
def test_the_simulation_matches_its_expectation(checkpoint_s: float, mtbf_s: float, restart_s: float) -> None:
    intervals = [ci.young_interval_s(checkpoint_s, mtbf_s) * 2 ** (k / 2) for k in range(-4, 5)]
    simulated = ci.simulated_waste_fractions(intervals, checkpoint_s, mtbf_s, restart_s, seed=1)
    expected = [ci.expected_waste_fraction(t, checkpoint_s, mtbf_s, restart_s) for t in intervals]
    assert simulated == pytest.approx(expected, rel=SIMULATION_TOLERANCE)
    assert ci.simulated_waste_fractions(intervals, checkpoint_s, mtbf_s, restart_s, seed=1) == simulated


def test_the_simulated_optimum_lies_near_young_when_the_write_is_small() -> None:
    young = ci.young_interval_s(SMALL_C, LARGE_M)
    intervals = [young * 2 ** (k / 20) for k in range(-20, 21)]
    simulated = ci.simulated_waste_fractions(intervals, SMALL_C, LARGE_M, RESTART, seed=0)
    best = intervals[simulated.index(min(simulated))]
    assert best == pytest.approx(young, rel=SIMULATED_OPTIMUM_TOLERANCE)


def test_waste_is_convex_around_the_optimum() -> None:
    young = ci.young_interval_s(SMALL_C, LARGE_M)
    intervals = [young * 2 ** (k / 2) for k in range(-4, 5)]
    curves = {
        "first order": [ci.first_order_waste_fraction(t, SMALL_C, LARGE_M, RESTART) for t in intervals],
        "simulated": ci.simulated_waste_fractions(intervals, SMALL_C, LARGE_M, RESTART, seed=2),
    }
    for name, waste in curves.items():
        for (t0, w0), (t1, w1), (t2, w2) in zip(zip(intervals, waste), zip(intervals[1:], waste[1:]),
                                                zip(intervals[2:], waste[2:])):
            chord = w0 + (w2 - w0) * (t1 - t0) / (t2 - t0)
            assert w1 < chord, f"{name}: not convex at T = {t1:.0f} s"
        assert waste.index(min(waste)) == len(intervals) // 2, f"{name}: the least waste is not at Young's interval"


def test_the_plot_draws_both_models_the_simulation_and_both_optima() -> None:
    intervals = [ci.young_interval_s(SMALL_C, LARGE_M) * 2 ** (k / 2) for k in range(-4, 5)]
    simulated = ci.simulated_waste_fractions(intervals, SMALL_C, LARGE_M, RESTART)
    ax = ci.plot_waste(Figure().subplots(), intervals, SMALL_C, LARGE_M, RESTART, simulated)
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["first order: C/T + (R + T/2)/M", "exact expectation", "simulated", "Young", "Daly"]
    assert ax.get_xscale() == "log"


@pytest.mark.parametrize("call", [
    lambda: ci.young_interval_s(-1.0, LARGE_M),
    lambda: ci.daly_interval_s(SMALL_C, 0.0),
    lambda: ci.first_order_waste_fraction(0.0, SMALL_C, LARGE_M),
    lambda: ci.expected_waste_fraction(100.0, SMALL_C, LARGE_M, -1.0),
    lambda: ci.simulated_waste_fractions([100.0, 0.0], SMALL_C, LARGE_M),
    lambda: ci.simulated_waste_fractions([100.0], SMALL_C, LARGE_M, failures=0),
    lambda: ci.plot_waste(Figure().subplots(), [100.0, 200.0], SMALL_C, LARGE_M, simulated=[0.1]),
])
def test_arguments_outside_the_model_are_refused(call) -> None:
    with pytest.raises(ValueError):
        call()

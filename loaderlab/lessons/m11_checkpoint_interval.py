"""What notebook 11 computes about restarts: how often to checkpoint, and what a failure costs, by formula and by
simulation.

The model. A job computes for an interval of T seconds, then writes a checkpoint for C seconds, and repeats. Failures
come at random, one every M seconds on average (the mean time between failures), at any moment: while computing,
while writing, while restarting. After a failure the job restarts: R seconds of rendezvous, process start, imports and
checkpoint load, before the first step again. A failure loses the work done since the last checkpoint whose write
completed (a write cut short saves nothing), so a failure costs R plus half an interval on average.

Two estimates of the best interval:

- Young (J. W. Young, "A first order approximation to the optimum checkpoint interval", Communications of the ACM
  17(9), 1974, doi:10.1145/361147.361115): T = sqrt(2 C M). The paper's text was not read here; the formula as
  stated in the abstract of "Robustness of the Young/Daly formula for stochastic iterative applications"
  (hal.inria.fr/hal-02514107): "the optimal period is P_YD = sqrt(2 mu_f C) where mu_f is the Mean Time Between
  Failures (MTBF) and C is the checkpoint time". It minimises the first-order waste below, exactly.
- Daly (J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps", Future Generation
  Computer Systems 22(3), 2006, doi:10.1016/j.future.2004.11.016), his equation 37: T = sqrt(2 C M) [1 + (1/3)
  sqrt(C / 2M) + (1/9) (C / 2M)] - C while C < 2M, and T = M otherwise. Read in LLNL's SCR library, which implements
  it with that citation (github.com/LLNL/scr, scripts/common/scr_ckpt_interval.py, "See equation 37 from above
  paper"); the paper's own captions (its ScienceDirect page) give T = 117 min for M = 24 h, 57 min for M = 6 h and
  9.1 min for M = 15 min, with R = 10 min and C = 5 min, which `daly_interval_s` reproduces
  (tests/test_module_11_checkpoint_interval.py).

`expected_waste_fraction` is the exact expectation of the model above (derived here, a renewal argument: see its
docstring); its minimum lies within 0.3 % of Daly's estimate even at the paper's M = 15 min, C = 5 min (computed), and
`simulated_waste_fractions` measures the same model by drawing failures, so the notebook can set the formulas against
a simulation. Times are in seconds throughout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.ticker import NullFormatter


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _check_model(checkpoint_s: float, mtbf_s: float, restart_s: float = 0.0) -> None:
    _require(checkpoint_s >= 0, f"checkpoint_s must be >= 0, got {checkpoint_s}")
    _require(mtbf_s > 0, f"mtbf_s must be > 0, got {mtbf_s}")
    _require(restart_s >= 0, f"restart_s must be >= 0, got {restart_s}")


def lost_time_per_failure_s(interval_s: float, restart_s: float) -> float:
    """What one failure costs on average, to first order: the restart, plus the work since the last checkpoint, half
    an interval on average (a failure strikes at a uniformly random moment of the interval)."""
    _require(interval_s > 0, f"interval_s must be > 0, got {interval_s}")
    _require(restart_s >= 0, f"restart_s must be >= 0, got {restart_s}")
    return restart_s + interval_s / 2


def first_order_waste_fraction(interval_s: float, checkpoint_s: float, mtbf_s: float, restart_s: float = 0.0) -> float:
    """The share of wall-clock time that is not useful work, to first order: C/T for the checkpoint written after
    every interval, plus (R + T/2)/M for the failures (one every M seconds, each costing `lost_time_per_failure_s`).

    Valid while C/T, T/M and R/M are all small: it neglects failures during a write or a restart, and it exceeds 1
    where the job would make no progress at all. Its minimum over T is Young's interval, sqrt(2 C M), exactly; the
    restart adds R/M whatever the interval, so it does not move the optimum.
    """
    _check_model(checkpoint_s, mtbf_s, restart_s)
    per_failure_s = lost_time_per_failure_s(interval_s, restart_s)
    return checkpoint_s / interval_s + per_failure_s / mtbf_s


def expected_waste_fraction(interval_s: float, checkpoint_s: float, mtbf_s: float, restart_s: float = 0.0) -> float:
    """The share of wall-clock time that is not useful work, exactly, under the module's model with failures drawn
    from an exponential of mean M: 1 - T exp(-R/M) / (M (exp((T + C)/M) - 1)).

    Derivation (renewal): between two failures lies a time X, exponential with mean M; in it the job restarts (R), then
    completes floor((X - R)/(T + C)) intervals of T, when X > R. The expected number of completed intervals is the sum
    over k >= 1 of P(X > R + k (T + C)) = exp(-R/M) / (exp((T + C)/M) - 1), and the useful share is T times that over
    E[X] = M. Expanding to first order in C/T, T/M and R/M gives `first_order_waste_fraction`. Here R only scales
    the useful share by exp(-R/M): it does not move the optimum either.
    """
    _require(interval_s > 0, f"interval_s must be > 0, got {interval_s}")
    _check_model(checkpoint_s, mtbf_s, restart_s)
    useful = interval_s * math.exp(-restart_s / mtbf_s) / (mtbf_s * math.expm1((interval_s + checkpoint_s) / mtbf_s))
    return 1.0 - useful


def young_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum of the interval between checkpoints: sqrt(2 C M) (see the module docstring)."""
    _check_model(checkpoint_s, mtbf_s)
    return math.sqrt(2 * checkpoint_s * mtbf_s)


def daly_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum (his equation 37; see the module docstring): sqrt(2 C M) [1 + (1/3) sqrt(C/2M) +
    (1/9) (C/2M)] - C while C < 2M, and M once the write takes twice the mean time between failures or longer.

    For small C/M it is Young's interval times 1 - (2/3) sqrt(C/2M) + (1/9) (C/2M): the two agree as C/M goes to 0.
    """
    _check_model(checkpoint_s, mtbf_s)
    if checkpoint_s >= 2 * mtbf_s:
        return mtbf_s
    ratio = checkpoint_s / (2 * mtbf_s)
    return young_interval_s(checkpoint_s, mtbf_s) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - checkpoint_s


def simulated_waste_fractions(intervals_s: Sequence[float], checkpoint_s: float, mtbf_s: float, restart_s: float = 0.0,
                              failures: int = 100_000, seed: int = 0) -> list[float]:
    """The share of wall-clock time that was not useful work, for each interval of `intervals_s`, measured over a run of
    `failures` failures drawn from an exponential of mean `mtbf_s` (numpy's generator seeded with `seed`).

    The rules are the module's model: after each failure (and at the start) the job restarts for R seconds, then
    repeats T of work and C of write; a failure at any moment (a restart and a write included) loses everything since
    the last completed write; an interval counts as useful once its write has completed. The run ends at the last
    failure, so the waste is 1 - (useful work) / (sum of the times between failures). Every interval meets the same
    failures (common random numbers), so the difference between two intervals is not the noise of two draws; its
    expectation is `expected_waste_fraction`.
    """
    _check_model(checkpoint_s, mtbf_s, restart_s)
    _require(failures >= 1, f"failures must be >= 1, got {failures}")
    _require(all(t > 0 for t in intervals_s), f"every interval must be > 0, got {list(intervals_s)}")
    between_failures = np.random.default_rng(seed).exponential(mtbf_s, failures)
    working = np.clip(between_failures - restart_s, 0.0, None)
    wall = float(between_failures.sum())
    fractions = []
    for interval in intervals_s:
        completed = np.floor(working / (interval + checkpoint_s))
        fractions.append(1.0 - float(interval * completed.sum()) / wall)
    return fractions


def plot_waste(ax: Axes, intervals_s: Sequence[float], checkpoint_s: float, mtbf_s: float, restart_s: float = 0.0,
               simulated: Sequence[float] | None = None) -> Axes:
    """Draw onto `ax` the waste against the interval (log scale): the first-order model, the exact expectation, the
    simulated fractions if given (one per interval of `intervals_s`), and Young's and Daly's intervals as vertical
    lines. Returns `ax`."""
    intervals = list(intervals_s)
    _require(simulated is None or len(simulated) == len(intervals),
             "simulated must hold one fraction per interval")
    ax.plot(intervals, [first_order_waste_fraction(t, checkpoint_s, mtbf_s, restart_s) for t in intervals],
            label="first order: C/T + (R + T/2)/M")
    ax.plot(intervals, [expected_waste_fraction(t, checkpoint_s, mtbf_s, restart_s) for t in intervals],
            linestyle="--", label="exact expectation")
    if simulated is not None:
        ax.plot(intervals, list(simulated), "o", markersize=4, label="simulated")
    ax.axvline(young_interval_s(checkpoint_s, mtbf_s), color="0.3", linestyle=":", label="Young")
    ax.axvline(daly_interval_s(checkpoint_s, mtbf_s), color="0.6", linestyle="-.", label="Daly")
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())  # a narrow range labels every minor tick, unreadably
    ax.set_xlabel("interval between checkpoints (s)")
    ax.set_ylabel("share of wall-clock time wasted")
    ax.set_title(f"C = {checkpoint_s:g} s, M = {mtbf_s:g} s, R = {restart_s:g} s")
    ax.legend(fontsize="small")
    return ax

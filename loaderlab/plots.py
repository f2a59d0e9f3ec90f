"""The course's plots: timelines of what ran when, throughput against workers, utilization."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from loaderlab.trace import STAGES, Span, Tracer

STAGE_COLOURS = {
    "read": "#4c72b0",
    "decode": "#dd8452",
    "transform": "#55a868",
    "collate": "#8172b3",
    "wait": "#c44e52",
    "step": "#64b5cd",
}
OTHER_COLOUR = "#999999"


def _axes(ax: Axes | None, size: tuple[float, float]) -> Axes:
    return ax if ax is not None else plt.subplots(figsize=size)[1]


def timeline(spans: Tracer | Sequence[Span], ax: Axes | None = None, title: str = "") -> Axes:
    """One row per thread or process, one bar per span, coloured by stage (as in tf.data's guide)."""
    items = spans.spans if isinstance(spans, Tracer) else list(spans)
    ax = _axes(ax, (11, 0.5 + 0.45 * max(1, len({s.lane for s in items}))))
    if not items:
        ax.set_title(title or "timeline (no spans recorded)")
        return ax
    origin = min(s.start for s in items)
    lanes = sorted({s.lane for s in items}, key=lambda lane: (lane != "accelerator", lane))
    for row, lane in enumerate(lanes):
        bars = [(s.start - origin, s.seconds) for s in items if s.lane == lane]
        colours = [STAGE_COLOURS.get(s.name, OTHER_COLOUR) for s in items if s.lane == lane]
        ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=colours)
    ax.set_yticks(range(len(lanes)), lanes)
    ax.invert_yaxis()
    ax.set_xlabel("seconds")
    ax.set_title(title)
    names = [n for n in STAGES if any(s.name == n for s in items)]
    names += sorted({s.name for s in items} - set(STAGES))
    ax.legend(
        handles=[Patch(color=STAGE_COLOURS.get(n, OTHER_COLOUR), label=n) for n in names],
        loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small",
    )
    return ax


def stage_breakdown(seconds_by_stage: Mapping[str, float], ax: Axes | None = None, title: str = "") -> Axes:
    """Horizontal bars of seconds per stage, largest first."""
    ax = _axes(ax, (7, 0.4 + 0.4 * len(seconds_by_stage)))
    ordered = sorted(seconds_by_stage.items(), key=lambda kv: kv[1])
    ax.barh([k for k, _ in ordered], [v for _, v in ordered],
            color=[STAGE_COLOURS.get(k, OTHER_COLOUR) for k, _ in ordered])
    total = sum(seconds_by_stage.values()) or 1.0
    for row, (_, value) in enumerate(ordered):
        ax.text(value, row, f" {value:.3f} s ({value / total:.0%})", va="center", fontsize="small")
    ax.set_xlabel("seconds")
    ax.set_title(title)
    return ax


def throughput_vs_workers(
    workers: Sequence[int], items_per_s: Sequence[float], ax: Axes | None = None,
    title: str = "", cores: int | None = None, label: str | None = None,
) -> Axes:
    """Throughput curve over worker counts, with the usable-core count marked."""
    ax = _axes(ax, (6, 4))
    ax.plot(workers, items_per_s, marker="o", label=label)
    if cores is not None:
        ax.axvline(cores, color="grey", linestyle="--", linewidth=1)
        ax.annotate(f"{cores} usable cores", (cores, ax.get_ylim()[1]), ha="left", va="top", fontsize="small")
    ax.set_xlabel("workers")
    ax.set_ylabel("items/s")
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    if label:
        ax.legend()
    return ax


def utilization_bars(utilization: Mapping[str, float], ax: Axes | None = None, title: str = "") -> Axes:
    """Accelerator utilization (0..1) per configuration."""
    ax = _axes(ax, (7, 0.4 + 0.45 * len(utilization)))
    names = list(utilization)
    values = [utilization[n] for n in names]
    ax.barh(names, values, color=STAGE_COLOURS["step"])
    for row, value in enumerate(values):
        ax.text(min(value, 1.0), row, f" {value:.0%}", va="center", fontsize="small")
    ax.set_xlim(0, 1.1)
    ax.invert_yaxis()
    ax.set_xlabel("accelerator busy (share of wall time)")
    ax.set_title(title)
    return ax

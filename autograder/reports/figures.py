"""The figures of the reports, drawn with matplotlib and returned as standalone SVG text.

Each function takes plain data (scores, counts, statuses) and returns one SVG document; the HTML
pages embed it as a ``data:`` image, so a page needs no network, no fonts (text is drawn as paths)
and no script to show its figures. Figures are built on ``matplotlib.figure.Figure`` directly,
never through pyplot, so no GUI backend or global figure state is involved, and the output is
deterministic (fixed id salt, no date).

Why one module of this length: every figure follows the same conventions (one ``Figure``, SVG
text, the report's palette), and they are kept together so they stay consistent.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from ..exercises import EXERCISES, ROOT

PASS = "#2e7d32"
"""Colour of a passed step."""
FAIL = "#c62828"
"""Colour of a failed step."""
UNGRADED = "#9e9e9e"
"""Colour of a step that was not graded (the notebook could not be read)."""
UNSTARTED = "#cfd8dc"
"""Colour of a step not started (its cell as released, or no answer cell): not a mistake."""
ROOT_COLOUR = "#1565c0"
"""Colour of the loss, where the backward pass starts."""

_RC: dict[Any, Any] = {
    "svg.hashsalt": "backprop-ninja",  # stable element ids: same data, same file
    "svg.fonttype": "path",  # text as outlines: the page needs no fonts
    "text.parse_math": False,  # labels are plain text, even with a "$" in them
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


@contextmanager
def _style() -> Iterator[None]:
    with matplotlib.rc_context(_RC):
        yield


def _svg(fig: Figure) -> str:
    """The figure as one SVG document (without the XML prolog, which inline use does not need)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg") :]


def score_histogram(scores: Sequence[float], max_score: float) -> str:
    """Histogram of the submissions' scores, one bar per whole point, with the mean marked."""
    with _style():
        fig = Figure(figsize=(6.4, 2.8))
        ax = fig.add_subplot()
        top = max(round(max_score), 1)
        bins = [b - 0.5 for b in range(top + 2)]
        clipped = [min(max(s, 0.0), float(top)) for s in scores]
        ax.hist(clipped, bins=bins, color=ROOT_COLOUR, edgecolor="white", rwidth=0.85)
        if scores:
            mean = sum(scores) / len(scores)
            ax.axvline(mean, color="#333333", linestyle="--", linewidth=1)
            right = mean < top / 2  # the label on the emptier side of the line
            ax.annotate(
                f"mean {mean:.1f}",
                (mean, 1),
                xycoords=("data", "axes fraction"),
                xytext=(4 if right else -4, -10),
                textcoords="offset points",
                ha="left" if right else "right",
                fontsize=8,
            )
        ax.set_xlim(-0.5, top + 0.5)
        ax.set_xlabel(f"score (out of {max_score:g})")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("submissions")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        return _svg(fig)


STATES = (("passed", PASS), ("wrong", FAIL), ("not started", UNSTARTED), ("not graded", UNGRADED))
"""The four outcomes of a step in the class figures, in the order of ``pass_rates``' counts."""


def pass_rates(names: Sequence[str], counts: Mapping[str, tuple[int, int, int, int]]) -> str:
    """Horizontal stacked bars, one per step in the exercise's (backward) order, top to bottom:
    the share of submissions that passed, answered wrongly, had not started (the cell as
    released) or were not graded (the notebook could not be read) on that step; at the right,
    the pass rate among the answers given.

    ``counts[step] = (passed, wrong, not_started, not_graded)``.
    """
    names = list(names)
    with _style():
        fig = Figure(figsize=(6.4, 0.22 * len(names) + 0.9))
        ax = fig.add_subplot()
        ys = range(len(names))
        left = [0.0] * len(names)
        for i, (label, colour) in enumerate(STATES):
            widths = []
            for n in names:
                c = counts.get(n, (0, 0, 0, 0))
                total = sum(c)
                widths.append(100.0 * c[i] / total if total else 0.0)
            ax.barh(ys, widths, left=left, color=colour, label=label, height=0.75)
            left = [a + w for a, w in zip(left, widths, strict=True)]
        for y, n in zip(ys, names, strict=True):
            p, f, _, _ = counts.get(n, (0, 0, 0, 0))
            rate = f"{100.0 * p / (p + f):.0f}%" if p + f else "–"
            ax.text(101, y, rate, va="center", fontsize=8)
        ax.set_yticks(list(ys), labels=names, fontfamily="monospace")
        ax.invert_yaxis()  # the first step of the exercise at the top
        ax.set_xlim(0, 100)
        ax.set_xlabel("% of submissions (right: pass rate among the answers given)")
        ax.legend(
            loc="upper center",
            bbox_to_anchor=(0.5, -0.6 / len(names) - 0.06 - 0.2 / len(names)),
            ncol=4,
            frameon=False,
        )
        return _svg(fig)


def case_failures(cases: Sequence[str], counts: Mapping[str, int], total: int) -> str:
    """Horizontal bars, one per hidden configuration: how many of ``total`` answers given
    (submissions that tried the step) fail under it. For an exercise of one step, this says
    more than a pass rate per step: which configurations the class's answers do not survive."""
    cases = list(cases)
    with _style():
        fig = Figure(figsize=(6.4, 0.3 * len(cases) + 0.9))
        ax = fig.add_subplot()
        ys = range(len(cases))
        values = [counts.get(c, 0) for c in cases]
        ax.barh(ys, values, color=FAIL, height=0.7)
        for y, v in zip(ys, values, strict=True):
            ax.text(v + 0.05 * max(total, 1) / 5, y, f"{v}/{total}", va="center", fontsize=8)
        ax.set_yticks(list(ys), labels=cases, fontfamily="monospace")
        ax.invert_yaxis()
        ax.set_xlim(0, max(total, 1) * 1.15)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("answers that fail under the configuration")
        return _svg(fig)


def diagnosis_heatmap(
    names: Sequence[str],
    codes: Sequence[str],
    counts: Mapping[tuple[str, str], int],
    unstarted: Mapping[str, int] | None = None,
) -> str:
    """Heatmap of how many submissions got each diagnosis code (rows) on each step (columns,
    in the exercise's order); ``counts[(code, step)]``, empty cells left blank. Steps not
    started (``unstarted[step]``: the cell as released, or no answer cell) are no mistake: they
    are a separate grey row below the mistakes, not a row of the heatmap."""
    names = list(names)
    unstarted = {n: v for n, v in (unstarted or {}).items() if v}
    with _style():
        rows = max(len(codes), 1) + (1.2 if unstarted else 0)
        fig = Figure(figsize=(min(9.0, 3.0 + 0.3 * len(names)), 0.32 * rows + 1.6))
        if not codes and not unstarted:
            ax = fig.add_subplot()
            ax.text(0.5, 0.5, "no diagnoses: every graded step passed", ha="center", va="center")
            ax.set_axis_off()
            return _svg(fig)
        heights = ([len(codes)] if codes else []) + ([1] if unstarted else [])
        axes = fig.subplots(
            len(heights),
            1,
            sharex=True,
            squeeze=False,
            gridspec_kw={"height_ratios": heights, "hspace": 0.25},
        )[:, 0]
        bands = []  # (axes, row labels, grid, colour map, value drawn darkest)
        if codes:
            grid = [[counts.get((c, n), 0) for n in names] for c in codes]
            bands.append((axes[0], list(codes), grid, "Reds", max(map(max, grid)) or 1))
        if unstarted:
            grid = [[unstarted.get(n, 0) for n in names]]
            bands.append((axes[-1], ["not started"], grid, "Greys", 2 * max(grid[0])))
        image = None
        for ax, labels, grid, cmap, top in bands:
            masked = [[v if v else float("nan") for v in row] for row in grid]
            im = ax.imshow(masked, cmap=cmap, vmin=0, vmax=top, aspect="auto")
            if cmap == "Reds":
                image = im
            for i, row in enumerate(grid):
                for j, v in enumerate(row):
                    if v:
                        colour = "white" if v > 0.6 * top else "black"
                        ax.text(j, i, str(v), ha="center", va="center", fontsize=7, color=colour)
            ax.set_yticks(range(len(labels)), labels=labels, fontfamily="monospace")
            ax.set_xticks([x - 0.5 for x in range(len(names) + 1)], minor=True)
            ax.set_yticks([y - 0.5 for y in range(len(labels) + 1)], minor=True)
            ax.grid(which="minor", color="#e0e0e0", linewidth=0.5)
            ax.tick_params(which="minor", length=0)
            for side in ("top", "right", "left", "bottom"):
                ax.spines[side].set_visible(False)
        axes[-1].set_xticks(
            range(len(names)),
            labels=names,
            rotation=60,
            ha="right",
            rotation_mode="anchor",
            fontfamily="monospace",
            fontsize=8,
        )
        if image is not None:
            bar = fig.colorbar(image, ax=list(axes), label="submissions", fraction=0.03, pad=0.01)
            bar.locator = MaxNLocator(integer=True)
            bar.update_ticks()
        return _svg(fig)


def _graph_layout(
    exercise: str,
) -> tuple[dict[str, tuple[float, float]], list[tuple[str, str]]]:
    """Positions of an exercise's backward graph's nodes and its edges (consumer -> variable).

    A node's level is one below its deepest consumer, so the loss is at the top and the
    embedding table at the bottom; within a level, intermediate variables come first (column 0,
    the spine of the graph) and parameters to their right.
    """
    ex = EXERCISES[exercise]
    params = list(ex.parameters)
    steps = [s for s in ex.steps if s.kind == "gradient"]  # a training step is drawn apart
    level: dict[str, int] = {ROOT: 0}
    for s in steps:  # exercise order: every consumer precedes the variable it consumes
        for c in s.consumers:
            level.setdefault(c, 1)
        level[s.var] = 1 + max(level[c] for c in s.consumers)
    rows: dict[int, list[str]] = {}
    for var, lv in level.items():
        rows.setdefault(lv, []).append(var)
    pos: dict[str, tuple[float, float]] = {}
    for lv, names in rows.items():
        names.sort(key=lambda v: (v in params, params.index(v) if v in params else 0))
        for col, var in enumerate(names):
            pos[var] = (1.6 * col, -float(lv))
    edges = [(c, s.var) for s in steps for c in s.consumers]
    return pos, edges


_W, _H = 1.4, 0.38
"""Width and height of a node of the backward graph, in data units (one level is 1)."""


def _arrow(
    start: tuple[float, float], end: tuple[float, float], style: str = "arc3,rad=0"
) -> FancyArrowPatch:
    """An edge of the backward graph, from ``start`` to ``end``."""
    return FancyArrowPatch(
        start,
        end,
        connectionstyle=style,
        arrowstyle="-|>",
        mutation_scale=8,
        color="#616161",
        linewidth=0.8,
        shrinkA=1,
        shrinkB=1,
    )


@lru_cache(maxsize=256)
def backward_graph(exercise: str, status: tuple[tuple[str, str], ...]) -> str:
    """An exercise's backward pass as a graph: one node per variable, the loss at the top, an
    arrow from each consumer to each variable it consumes (the way gradients flow).

    ``status`` pairs each step name with ``"pass"``, ``"fail"`` or ``"ungraded"`` (missing steps
    count as ungraded). Cached: most submissions of a class share a handful of patterns.
    """
    colours = {"pass": PASS, "fail": FAIL, "unstarted": UNSTARTED, "ungraded": UNGRADED}
    by_step = dict(status)
    ex = EXERCISES[exercise]
    steps_of = {s.var: s.name for s in ex.steps if s.kind == "gradient"}
    training = [s for s in ex.steps if s.kind == "training"]
    pos, edges = _graph_layout(exercise)
    with _style():
        depth = -min(y for _, y in pos.values()) + len(training)
        fig = Figure(figsize=(4.2, 0.38 * depth + 1.0))
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(-1.7, 4.1)
        ax.set_ylim(-depth - 0.8, 0.6)
        ax.set_axis_off()
        for src, dst in edges:
            (x0, y0), (x1, y1) = pos[src], pos[dst]
            if x0 == x1 and y0 - y1 > 1:
                # an edge that skips levels of the spine leaves and enters on the left side and
                # bows out to the left, clear of the nodes in between
                start, end = (x0 - _W / 2, y0), (x1 - _W / 2, y1)
                style = f"arc3,rad={0.25 + 0.02 * (y0 - y1)}"
            else:
                start, end, style = (x0, y0 - _H / 2), (x1, y1 + _H / 2), "arc3,rad=0"
            ax.add_patch(_arrow(start, end, style))
        for var, (x, y) in pos.items():
            name = steps_of.get(var, "")
            given = var == ROOT or var not in steps_of  # the top, or a given upstream gradient
            colour = ROOT_COLOUR if given else colours[by_step.get(name, "ungraded")]
            ax.add_patch(
                FancyBboxPatch(
                    (x - _W / 2, y - _H / 2),
                    _W,
                    _H,
                    boxstyle="round,pad=0.02,rounding_size=0.12",
                    facecolor=colour,
                    edgecolor="none",
                )
            )
            ax.text(
                x,
                y,
                var,
                ha="center",
                va="center",
                color="#37474f" if colour == UNSTARTED else "white",
                fontsize=8,
                fontfamily="monospace",
                fontweight="bold",
            )
        right = max(x for x, _ in pos.values()) + _W / 2
        for i, step in enumerate(training, start=1):
            # a step that uses every gradient above it (the update of Exercise 4): one wide box
            # under the whole graph, reached from the table's gradient at the bottom
            y = -depth + len(training) - i
            colour = colours[by_step.get(step.name, "ungraded")]
            ax.add_patch(_arrow((0, y + 1 - _H / 2), (0, y + _H / 2)))
            ax.add_patch(
                FancyBboxPatch(
                    (-_W / 2, y - _H / 2),
                    right + _W / 2,
                    _H,
                    boxstyle="round,pad=0.02,rounding_size=0.12",
                    facecolor=colour,
                    edgecolor="none",
                )
            )
            ax.text(
                (right - _W / 2) / 2,
                y,
                f"{step.name}: a training run with all the gradients",
                ha="center",
                va="center",
                color="white" if colour != UNSTARTED else "#37474f",
                fontsize=7.5,
                fontfamily="monospace",
                fontweight="bold",
            )
        handles = [
            Patch(color=PASS, label="passed"),
            Patch(color=FAIL, label="failed"),
            Patch(color=UNSTARTED, label="not started"),
            Patch(color=UNGRADED, label="not graded"),
        ]
        shown = set(by_step.values()) | {"pass", "fail"}
        keys = ("pass", "fail", "unstarted", "ungraded")
        ax.legend(
            handles=[h for h, k in zip(handles, keys, strict=True) if k in shown],
            loc="upper right",
            frameon=False,
            fontsize=8,
        )
        return _svg(fig)


@lru_cache(maxsize=64)
def row_strip(uses: tuple[int, ...], wrong: tuple[int, ...], labels: tuple[str, ...] = ()) -> str:
    """dC over the rows of C: bars as tall as the number of times the batch used each row, and
    below them a strip with one cell per row (its use count written in it), red where the
    student's gradient for the row is wrong, green where right, grey where unused and right.

    Cached: every submission of a run sees the same batch, and a given bug the same wrong rows.
    """
    bad = set(wrong)
    colours = [FAIL if r in bad else (PASS if u else UNGRADED) for r, u in enumerate(uses)]
    xs = list(range(len(uses)))
    with _style():
        fig = Figure(figsize=(max(4.0, 0.24 * len(uses) + 1.0), 2.9))
        bars, strip = fig.subplots(
            2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1], "hspace": 0.08}
        )
        bars.bar(xs, uses, color=colours, width=0.8)
        bars.set_ylabel("uses in the batch")
        bars.yaxis.set_major_locator(MaxNLocator(integer=True))
        bars.tick_params(axis="x", labelbottom=False, length=0)
        bars.legend(
            handles=[
                Patch(color=PASS, label="right"),
                Patch(color=FAIL, label="wrong"),
                Patch(color=UNGRADED, label="unused"),
            ],
            loc="upper right",
            frameon=False,
            fontsize=7,
            ncol=3,
        )
        for r, (u, colour) in enumerate(zip(uses, colours, strict=True)):
            strip.add_patch(Rectangle((r - 0.45, 0.0), 0.9, 1.0, color=colour))
            strip.text(r, 0.5, str(u), ha="center", va="center", color="white", fontsize=6.5)
        strip.set_ylim(0, 1)
        strip.set_yticks([])
        strip.spines["left"].set_visible(False)
        strip.spines["bottom"].set_visible(False)
        strip.tick_params(axis="x", length=0)
        strip.set_xticks(
            xs,
            labels=list(labels) if len(labels) == len(uses) else [str(x) for x in xs],
            fontfamily="monospace",
            fontsize=7,
        )
        strip.set_xlim(-0.6, len(uses) - 0.4)
        strip.set_xlabel("row of C (in each cell: its uses in the batch)")
        return _svg(fig)

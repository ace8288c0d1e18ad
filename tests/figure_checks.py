"""Readability checks shared by the figure tests: no legend holds more than MAX_LEGEND_ENTRIES entries
or covers plotted data (checked with matplotlib's renderer: no point of any line, nor any point along
its segments, falls inside a legend's window extent, and no legend sits inside an axes), and the
figure's title covers no panel's title."""

from __future__ import annotations

import numpy as np

from polyinterp.figures.style import MAX_LEGEND_ENTRIES


def _legends(fig):
    subfigs = [fig, *getattr(fig, "subfigs", [])]
    return [lg for f in subfigs for lg in f.legends] + [ax.get_legend() for ax in fig.axes if ax.get_legend()]


def _data_points(ax, renderer) -> np.ndarray:
    """Display coordinates of every drawn line's points and of 20 points along each of its segments (of a
    line clipped to the axes, as matplotlib draws them, those inside it)."""
    pts = []
    for line in ax.get_lines():
        if not line.get_visible() or line.get_transform() is not ax.transData:
            continue
        xy = np.column_stack([np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)])
        xy = ax.transData.transform(xy[np.isfinite(xy).all(axis=1)])
        if len(xy) > 1:
            t = np.linspace(0, 1, 20)[:, None, None]
            xy = np.concatenate([xy, (xy[:-1] + t * (xy[1:] - xy[:-1])).reshape(-1, 2)])
        if line.get_clip_on():  # what falls outside the axes is clipped: not drawn, so covered by nothing
            box = ax.get_window_extent(renderer)
            xy = xy[(xy[:, 0] >= box.x0) & (xy[:, 0] <= box.x1) & (xy[:, 1] >= box.y0) & (xy[:, 1] <= box.y1)]
        pts.append(xy)
    return np.concatenate(pts) if pts else np.zeros((0, 2))


def assert_readable(fig):
    """No legend of ``fig`` has more than MAX_LEGEND_ENTRIES entries or covers a point of plotted data, and
    the figure's title overlaps no axes title. Returns the legends."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = _legends(fig)
    for legend in legends:
        assert len(legend.get_texts()) <= MAX_LEGEND_ENTRIES, [t.get_text() for t in legend.get_texts()]
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            pts = _data_points(ax, renderer)
            inside = ((pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1))
            assert not inside.any(), f"legend {legend.get_title().get_text()!r} covers data of {ax.get_title()!r}"
            assert not box.overlaps(ax.get_window_extent(renderer)), "a legend inside an axes"
    title = fig._suptitle
    if title is not None and title.get_text():
        top = title.get_window_extent(renderer)
        for ax in fig.axes:
            assert not (ax.title.get_text() and top.overlaps(ax.title.get_window_extent(renderer))), \
                f"the figure's title covers the title of {ax.title.get_text()!r}"
    return legends

"""Server-rendered SVG of a confirmation rerun: good vs bad samples, no JavaScript.

:func:`samples_svg` draws a dot plot of both sides' samples in run order (x: run number in the
order the lab ran them, y: the measured value), each side's mean as a dashed line, and the
rerun's confidence interval of the % change drawn as a band of bad-mean values around the
good mean (``mean(good) * (1 + ci/100)``), which is where the bad mean would have to lie.

Safety: the output is built only from numbers that this module formats itself (``num``,
``_coord``: finite floats only, anything else is dropped) and from text escaped with
:func:`html.escape` -- a mail- or lab-derived label can never become markup.  The SVG uses
presentation attributes only (no ``style`` attributes or elements), so it renders under a
strict ``style-src 'self'`` Content-Security-Policy, inline in HTML or as a file.

Sample points are ``<circle class="sample good">`` / ``<circle class="sample bad">``, one per
sample; legend symbols are not circles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Any, Iterable

WIDTH, HEIGHT = 640, 260
LEFT, RIGHT, TOP, BOTTOM = 72, 16, 34, 40
GOOD_COLOR, BAD_COLOR, CI_COLOR = "#1f6fb2", "#c0392b", "#f3c6c0"


def finite(x: Any) -> float | None:
    if isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError, OverflowError):
        return None
    return v if math.isfinite(v) else None


def _coord(v: float) -> str:
    """A pixel coordinate: one decimal, no exponent."""
    s = f"{v:.1f}"
    return "0.0" if s == "-0.0" else s


def num(v: float) -> str:
    """A data value for a label: short and readable (3-4 significant digits, k/M/G suffixes
    for large magnitudes), never an exponent or a repr."""
    if v == 0:
        return "0"
    a = abs(v)
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if a >= div:
            return f"{v / div:.4g}{suffix}"
    if a >= 1e4:
        return f"{v:,.0f}"
    if a >= 1:
        return f"{v:.4g}" if a < 1000 else f"{v:.0f}"
    if a >= 1e-3:
        return f"{v:.3f}".rstrip("0").rstrip(".")
    return f"{v:.2e}"


def _pct(v: float) -> str:
    return f"{v:+.1f}%"


def _text(value: Any, limit: int = 80) -> str:
    s = "" if value is None else " ".join(str(value).split())
    s = "".join(ch for ch in s if ch.isprintable())
    if len(s) > limit:
        s = s[: limit - 1] + "\u2026"
    return escape(s, quote=True)


def _nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, count)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    ticks, t = [], first
    while t <= hi + step * 1e-9 and len(ticks) < 20:
        ticks.append(0.0 if abs(t) < step * 1e-9 else t)
        t += step
    return ticks


def _run_order(order: Any, n_good: int, n_bad: int) -> list[tuple[str, int]]:
    """(side, index within the side) for every run, in the order they ran.  A missing or
    inconsistent ``order`` falls back to all good runs, then all bad runs; extra entries are
    ignored and samples the order does not mention are appended."""
    seq: list[tuple[str, int]] = []
    used = {"good": 0, "bad": 0}
    size = {"good": n_good, "bad": n_bad}
    if isinstance(order, (list, tuple)):
        for side in order:
            if side in used and used[side] < size[side]:
                seq.append((side, used[side]))
                used[side] += 1
    for side in ("good", "bad"):
        while used[side] < size[side]:
            seq.append((side, used[side]))
            used[side] += 1
    return seq


def _samples(values: Iterable[Any] | None) -> list[float]:
    out = []
    for x in values or []:
        v = finite(x)
        if v is not None:
            out.append(v)
    return out


@dataclass(frozen=True)
class _Frame:
    """The plot area (pixels) and the value range it shows; ``n`` runs along x."""

    x0: float
    x1: float
    y0: float
    y1: float
    vmin: float
    vmax: float
    n: int

    def px(self, i: int) -> float:
        return self.x0 + (self.x1 - self.x0) * ((i + 0.5) / self.n)

    def py(self, v: float) -> float:
        return self.y1 - (self.y1 - self.y0) * ((v - self.vmin) / (self.vmax - self.vmin))


def _ci_band(mean_g: float | None, ci: Any) -> tuple[float, float, float, float] | None:
    """(low, high) of the bad mean the CI of the change allows, and the CI itself (%)."""
    if mean_g is not None and isinstance(ci, (list, tuple)) and len(ci) == 2:
        lo, hi = finite(ci[0]), finite(ci[1])
        if lo is not None and hi is not None:
            a, b = mean_g * (1 + lo / 100), mean_g * (1 + hi / 100)
            return (min(a, b), max(a, b), min(lo, hi), max(lo, hi))
    return None


def _value_range(values: list[float]) -> tuple[float, float, list[float]]:
    """(vmin, vmax, ticks) of the y axis: the values padded, widened to whole ticks."""
    vmin, vmax = min(values), max(values)
    if vmax - vmin < 1e-12 * max(1.0, abs(vmax)):
        pad = abs(vmax) * 0.05 or 1.0
    else:
        pad = (vmax - vmin) * 0.08
    vmin, vmax = vmin - pad, vmax + pad
    ticks = _nice_ticks(vmin, vmax)
    return min(vmin, ticks[0]), max(vmax, ticks[-1]), ticks


def _grid(fr: _Frame, ticks: list[float]) -> list[str]:
    """The plot area, its grid lines and the y labels."""
    parts = [f'<rect x="{_coord(fr.x0)}" y="{_coord(fr.y0)}" width="{_coord(fr.x1 - fr.x0)}" '
             f'height="{_coord(fr.y1 - fr.y0)}" fill="#fff" stroke="#bbb"/>']
    for t in ticks:
        y = fr.py(t)
        parts.append(f'<line class="grid" x1="{_coord(fr.x0)}" x2="{_coord(fr.x1)}" y1="{_coord(y)}" '
                     f'y2="{_coord(y)}" stroke="#eee"/>')
        parts.append(f'<text x="{_coord(fr.x0 - 6)}" y="{_coord(y + 4)}" text-anchor="end" fill="#444">'
                     f'{escape(num(t))}</text>')
    return parts


def _band_and_means(fr: _Frame, band, mean_g: float | None, mean_b: float | None) -> list[str]:
    """The CI band of the bad mean, and both means as dashed lines."""
    parts = []
    if band:
        top, bottom = fr.py(band[1]), fr.py(band[0])
        parts.append(f'<rect class="ci" x="{_coord(fr.x0)}" y="{_coord(top)}" width="{_coord(fr.x1 - fr.x0)}" '
                     f'height="{_coord(max(bottom - top, 1.0))}" fill="{CI_COLOR}" fill-opacity="0.6">'
                     f'<title>CI of the change: {escape(_pct(band[2]))} to {escape(_pct(band[3]))} '
                     f'(bad mean {escape(num(band[0]))} to {escape(num(band[1]))})</title></rect>')
    for mean, color, side in ((mean_g, GOOD_COLOR, "good"), (mean_b, BAD_COLOR, "bad")):
        if mean is None:
            continue
        y = fr.py(mean)
        parts.append(f'<line class="mean {side}" x1="{_coord(fr.x0)}" x2="{_coord(fr.x1)}" y1="{_coord(y)}" '
                     f'y2="{_coord(y)}" stroke="{color}" stroke-width="1.5" stroke-dasharray="6 4">'
                     f'<title>{side} mean {escape(num(mean))}</title></line>')
    return parts


def _axes(fr: _Frame, height: int, metric: str, hint: str) -> list[str]:
    """Run numbers along x, and the two axis titles."""
    parts = []
    step = max(1, math.ceil(fr.n / 12))
    for i in range(0, fr.n, step):
        parts.append(f'<text x="{_coord(fr.px(i))}" y="{_coord(fr.y1 + 15)}" text-anchor="middle" fill="#444">'
                     f'{i + 1}</text>')
    parts.append(f'<text x="{_coord((fr.x0 + fr.x1) / 2)}" y="{_coord(height - 6)}" text-anchor="middle" '
                 f'fill="#444">run (in the order run)</text>')
    mid = _coord((fr.y0 + fr.y1) / 2)
    parts.append(f'<text x="14" y="{mid}" text-anchor="middle" fill="#444" '
                 f'transform="rotate(-90 14 {mid})">{metric}{" " + hint if hint else ""}</text>')
    return parts


def _dots(fr: _Frame, seq: list[tuple[str, int]], good: list[float], bad: list[float]) -> list[str]:
    """One circle per sample, in run order."""
    parts = []
    r = 4.5 if fr.n <= 40 else 3.0
    for i, (side, k) in enumerate(seq):
        v = (good if side == "good" else bad)[k]
        color = GOOD_COLOR if side == "good" else BAD_COLOR
        parts.append(f'<circle class="sample {side}" cx="{_coord(fr.px(i))}" cy="{_coord(fr.py(v))}" '
                     f'r="{_coord(r)}" fill="{color}" fill-opacity="{"0.85" if side == "bad" else "0.75"}" '
                     f'stroke="#fff"><title>{side} run {k + 1} (run {i + 1}): {escape(num(v))}</title></circle>')
    return parts


def _legend(x: float, good: list[float], bad: list[float], mean_g, mean_b, band) -> list[str]:
    """Squares and text above the plot (squares, so only samples are circles)."""
    parts = []
    items = [("good", GOOD_COLOR, len(good), mean_g), ("bad", BAD_COLOR, len(bad), mean_b)]
    for side, color, count, mean in items:
        txt = f"{side}: {count} runs" + (f", mean {num(mean)}" if mean is not None else "")
        parts.append(f'<rect x="{_coord(x)}" y="10" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{_coord(x + 14)}" y="19" fill="#222">{escape(txt)}</text>')
        x += 16 + 7 * len(txt)
    if band:
        txt = f"CI {_pct(band[2])} to {_pct(band[3])}"
        parts.append(f'<rect x="{_coord(x)}" y="10" width="10" height="10" fill="{CI_COLOR}"/>')
        parts.append(f'<text x="{_coord(x + 14)}" y="19" fill="#222">{escape(txt)}</text>')
    return parts


def samples_svg(rerun: dict[str, Any], *, width: int = WIDTH, height: int = HEIGHT) -> str:
    """An ``<svg>`` dot plot of one rerun (``{"samples": {"good": [...], "bad": [...]},
    "order": [...], "ci": [lo, hi], "metric", "higher_is_better", ...}``)."""
    samples = rerun.get("samples") if isinstance(rerun.get("samples"), dict) else {}
    good, bad = _samples(samples.get("good")), _samples(samples.get("bad"))
    metric = _text(rerun.get("metric") or "value", 48)
    direction = rerun.get("higher_is_better")
    hint = "(higher is better)" if direction is True else "(lower is better)" if direction is False else ""
    label = f"Rerun samples of {metric}: {len(good)} good, {len(bad)} bad"
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="samples" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" aria-label="{label}" '
            f'font-family="sans-serif" font-size="12"><title>{label}</title>')
    if not good and not bad:
        return (head + f'<text x="{_coord(width / 2)}" y="{_coord(height / 2)}" text-anchor="middle" '
                       f'fill="#555">no samples</text></svg>')

    mean_g = sum(good) / len(good) if good else None
    mean_b = sum(bad) / len(bad) if bad else None
    band = _ci_band(mean_g, rerun.get("ci"))
    vmin, vmax, ticks = _value_range(good + bad + ([band[0], band[1]] if band else []))
    seq = _run_order(rerun.get("order"), len(good), len(bad))
    fr = _Frame(LEFT, width - RIGHT, TOP, height - BOTTOM, vmin, vmax, len(seq))
    parts = [head, *_grid(fr, ticks), *_band_and_means(fr, band, mean_g, mean_b), *_axes(fr, height, metric, hint),
             *_dots(fr, seq, good, bad), *_legend(fr.x0, good, bad, mean_g, mean_b, band), "</svg>"]
    return "".join(parts)

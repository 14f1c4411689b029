"""Line charts as inline SVG, drawn on the server: no script, no library, no CDN.

`line_chart` takes plain numbers and returns markup. Colours come from CSS
classes (`static/style.css`), so charts follow the light and dark themes; the
CSP allows no inline styles, and none are used. The SVG scales to its
container through its viewBox.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

WIDTH, HEIGHT = 640.0, 280.0
LEFT, RIGHT, TOP, BOTTOM = 56.0, 12.0, 28.0, 40.0

XY = tuple[float, float]


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    points: Sequence[XY]
    css: str = "s0"


@dataclass(frozen=True, slots=True)
class Band:
    """A shaded area between two curves sharing their x values (a confidence interval)."""

    lower: Sequence[XY]
    upper: Sequence[XY]
    css: str = "band"


@dataclass(frozen=True, slots=True)
class Rule:
    """A horizontal line across the chart (a bound, zero)."""

    y: float
    label: str
    css: str = "rule"


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    x_label: str
    y_label: str
    series: Sequence[Series]
    bands: Sequence[Band] = ()
    rules: Sequence[Rule] = ()
    legend: bool = True
    id: str = "chart"
    # Each point gets a marker whose tooltip gives its values (SPSA parameters).
    hover_points: bool = False


@dataclass(frozen=True, slots=True)
class _Scale:
    low: float
    high: float
    start: float  # pixel of `low`
    end: float  # pixel of `high`

    def __call__(self, value: float) -> float:
        span = self.high - self.low
        return self.start + (value - self.low) / span * (self.end - self.start)


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` round tick values covering [low, high] (1, 2 or 5 × 10^k apart)."""
    if high - low < 1e-9 * max(1.0, abs(low), abs(high)):  # one value (or rounding noise)
        middle = round((low + high) / 2.0, 9)
        low, high = middle - 1.0, middle + 1.0
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 12))
    return ticks


def tick_text(value: float) -> str:
    if abs(value) >= 1e4:
        return f"{value / 1000:g}k"
    if value != 0 and abs(value) < 1e-3:
        return f"{value:.0e}"
    return f"{value:g}"


def line_chart(chart: Chart) -> Markup:
    """The chart as an `<svg>` element (an empty-state note when there is no data)."""
    xs = [x for s in chart.series for x, _ in s.points]
    ys = [y for s in chart.series for _, y in s.points]
    ys += [y for band in chart.bands for _, y in (*band.lower, *band.upper)]
    ys += [rule.y for rule in chart.rules]
    if not xs:
        return Markup('<p class="muted chart-empty">{}: no data yet.</p>').format(chart.title)
    x_ticks = nice_ticks(min(0.0, *xs), max(xs))
    y_ticks = nice_ticks(min(ys), max(ys))
    x = _Scale(x_ticks[0], x_ticks[-1], LEFT, WIDTH - RIGHT)
    y = _Scale(y_ticks[0], y_ticks[-1], HEIGHT - BOTTOM, TOP)
    title_id = f"{chart.id}-title"
    parts = [
        f'<svg class="chart" id="{escape(chart.id)}" viewBox="0 0 {WIDTH:g} {HEIGHT:g}" '
        f'role="img" aria-labelledby="{escape(title_id)}">',
        f'<title id="{escape(title_id)}">{escape(chart.title)}</title>',
        *_axes(x, y, x_ticks, y_ticks, chart),
        *(_band(band, x, y) for band in chart.bands),
        *(_rule(rule, x, y) for rule in chart.rules),
        *(
            _series(index, series, x, y, hover=chart.hover_points)
            for index, series in enumerate(chart.series)
        ),
    ]
    if chart.legend:
        parts.extend(_legend(chart.series))
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - built above with every text escaped


def _axes(
    x: _Scale, y: _Scale, x_ticks: list[float], y_ticks: list[float], chart: Chart
) -> list[str]:
    out = ['<g class="grid">']
    for value in y_ticks:
        py = y(value)
        out.append(f'<line x1="{LEFT:g}" x2="{WIDTH - RIGHT:g}" y1="{py:.1f}" y2="{py:.1f}"/>')
    out.append('</g><g class="ticks">')
    for value in y_ticks:
        out.append(
            f'<text x="{LEFT - 6:g}" y="{y(value) + 4:.1f}" text-anchor="end">'
            f"{escape(tick_text(value))}</text>"
        )
    for value in x_ticks:
        out.append(
            f'<text x="{x(value):.1f}" y="{HEIGHT - BOTTOM + 16:g}" text-anchor="middle">'
            f"{escape(tick_text(value))}</text>"
        )
    out.append("</g>")
    out.append(
        f'<text class="axis-label" x="{(LEFT + WIDTH - RIGHT) / 2:g}" y="{HEIGHT - 6:g}" '
        f'text-anchor="middle">{escape(chart.x_label)}</text>'
    )
    out.append(
        f'<text class="axis-label" x="14" y="{(TOP + HEIGHT - BOTTOM) / 2:g}" text-anchor="middle" '
        f'transform="rotate(-90 14 {(TOP + HEIGHT - BOTTOM) / 2:g})">{escape(chart.y_label)}</text>'
    )
    out.append(
        f'<rect class="frame" x="{LEFT:g}" y="{TOP:g}" width="{WIDTH - LEFT - RIGHT:g}" '
        f'height="{HEIGHT - TOP - BOTTOM:g}"/>'
    )
    return out


def _path(points: Sequence[XY], x: _Scale, y: _Scale) -> str:
    return " ".join(f"{x(px):.1f},{y(py):.1f}" for px, py in points)


def _series(index: int, series: Series, x: _Scale, y: _Scale, *, hover: bool) -> str:
    """One series in its own group (`data-series`, which the page's toggles hide),
    with a marker per point when `hover`: its tooltip is the point's values."""
    parts = [f'<g class="series" data-series="{index}">', _polyline(series, x, y)]
    if hover and len(series.points) > 1:
        label = series.label
        for px, py in series.points:
            tip = escape(f"{label}: {py:.3f} at {px:,.0f}")
            parts.append(
                f'<circle class="point {escape(series.css)}" cx="{x(px):.1f}" cy="{y(py):.1f}" '
                f'r="4"><title>{tip}</title></circle>'
            )
    parts.append("</g>")
    return "".join(parts)


def _polyline(series: Series, x: _Scale, y: _Scale) -> str:
    label = escape(series.label)
    if len(series.points) == 1:
        ((px, py),) = series.points
        return (
            f'<circle class="line {escape(series.css)}" cx="{x(px):.1f}" cy="{y(py):.1f}" r="3">'
            f"<title>{label}</title></circle>"
        )
    return (
        f'<polyline class="line {escape(series.css)}" points="{_path(series.points, x, y)}">'
        f"<title>{label}</title></polyline>"
    )


def _band(band: Band, x: _Scale, y: _Scale) -> str:
    outline = [*band.upper, *reversed(band.lower)]
    return f'<polygon class="{escape(band.css)}" points="{_path(outline, x, y)}"/>'


def _rule(rule: Rule, x: _Scale, y: _Scale) -> str:
    py = y(rule.y)
    return (
        f'<g class="{escape(rule.css)}"><line x1="{x.start:g}" x2="{x.end:g}" '
        f'y1="{py:.1f}" y2="{py:.1f}"/><text x="{x.end - 4:g}" y="{py - 4:.1f}" '
        f'text-anchor="end">{escape(rule.label)}</text></g>'
    )


def _legend(series: Sequence[Series]) -> list[str]:
    out = ['<g class="legend">']
    px = LEFT
    for item in series:
        out.append(
            f'<line class="line {escape(item.css)}" x1="{px:g}" x2="{px + 16:g}" y1="12" y2="12"/>'
            f'<text x="{px + 20:g}" y="16">{escape(item.label)}</text>'
        )
        px += 28 + 7 * len(item.label)
    out.append("</g>")
    return out


@dataclass(frozen=True, slots=True)
class Gauge:
    """A horizontal scale from `low` to `high` with a marker at `value`, an
    optional shaded interval, and labelled ticks (bounds)."""

    label: str
    value: float
    low: float
    high: float
    value_text: str
    interval: tuple[float, float] | None = None
    marks: Sequence[tuple[float, str]] = ()  # a mark with empty text is a bare line
    id: str = "gauge"


GAUGE_WIDTH, GAUGE_HEIGHT, GAUGE_PAD = 480.0, 70.0, 24.0


def gauge(spec: Gauge) -> Markup:
    scale = _Scale(spec.low, spec.high, GAUGE_PAD, GAUGE_WIDTH - GAUGE_PAD)

    def at(value: float) -> float:
        return scale(min(max(value, spec.low), spec.high))

    track_y = 34.0
    parts = [
        f'<svg class="gauge" id="{escape(spec.id)}" viewBox="0 0 {GAUGE_WIDTH:g} {GAUGE_HEIGHT:g}"'
        f' role="img" aria-label="{escape(spec.label)}: {escape(spec.value_text)}">',
        f'<text class="gauge-label" x="{GAUGE_PAD:g}" y="14">{escape(spec.label)}</text>',
        f'<text class="gauge-value" x="{GAUGE_WIDTH - GAUGE_PAD:g}" y="14" text-anchor="end">'
        f"{escape(spec.value_text)}</text>",
        f'<rect class="gauge-track" x="{GAUGE_PAD:g}" y="{track_y - 4:g}" '
        f'width="{GAUGE_WIDTH - 2 * GAUGE_PAD:g}" height="8" rx="4"/>',
    ]
    if spec.interval is not None:
        left, right = at(spec.interval[0]), at(spec.interval[1])
        parts.append(
            f'<rect class="gauge-interval" x="{left:.1f}" y="{track_y - 6:g}" '
            f'width="{max(right - left, 1.0):.1f}" height="12" rx="3"/>'
        )
    for value, text in spec.marks:
        px = at(value)
        parts.append(
            f'<line class="gauge-mark" x1="{px:.1f}" x2="{px:.1f}" y1="{track_y - 9:g}" '
            f'y2="{track_y + 9:g}"/>'
        )
        if text:
            parts.append(
                f'<text class="gauge-tick" x="{px:.1f}" y="{track_y + 24:g}" '
                f'text-anchor="middle">{escape(text)}</text>'
            )
    parts.append(f'<circle class="gauge-needle" cx="{at(spec.value):.1f}" cy="{track_y:g}" r="7"/>')
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - built above with every text escaped

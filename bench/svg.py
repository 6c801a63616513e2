"""bench/svg.py: the picture of a bench/run, drawn as SVG with the standard library.

Two panels share one column per load shape: above, bars of requests/s per server;
below, each server's latency percentiles (p50, p90, p99, p99.9) as a line on a
log scale, so two latency distributions are compared by where their lines sit.
"""

import math
from xml.sax.saxutils import escape, quoteattr

# Okabe-Ito colours: told apart with the common colour-vision deficiencies too.
COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442"]
MARKERS = ["circle", "square", "diamond", "triangle"]
PERCENTILES = [("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p99.9", "p999")]
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"

LEFT, RIGHT = 78, 24
COLUMN = 170  # width of one shape's column
BARS_TOP, BARS_HEIGHT = 140, 200
LAT_TOP, LAT_HEIGHT = 432, 250
HEIGHT = 764


class Canvas:
    def __init__(self, width, height):
        self.width, self.height = width, height
        self.parts = []

    def add(self, element):
        self.parts.append(element)

    def text(self, x, y, s, size=12, anchor="start", weight="normal", fill="#222", rotate=None):
        extra = f' transform="rotate({rotate} {x:.1f} {y:.1f})"' if rotate is not None else ""
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
                 f'font-weight="{weight}" fill="{fill}"{extra}>{escape(str(s))}</text>')

    def line(self, x1, y1, x2, y2, stroke="#222", width=1.0, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" '
                 f'stroke-width="{width}"{d}/>')

    def rect(self, x, y, w, h, fill, stroke="none", title=None):
        tip = f"<title>{escape(title)}</title>" if title else ""
        self.add(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{max(h, 0):.1f}" '
                 f'fill="{fill}" stroke="{stroke}">{tip}</rect>')

    def marker(self, kind, x, y, colour, title):
        tip = f"<title>{escape(title)}</title>"
        r = 4.0
        if kind == "circle":
            shape = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}"'
        elif kind == "square":
            shape = f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r}" height="{2 * r}"'
        elif kind == "diamond":
            pts = f"{x:.1f},{y - r - 1:.1f} {x + r + 1:.1f},{y:.1f} {x:.1f},{y + r + 1:.1f} {x - r - 1:.1f},{y:.1f}"
            shape = f'<polygon points="{pts}"'
        else:
            pts = f"{x:.1f},{y - r - 1:.1f} {x + r + 1:.1f},{y + r:.1f} {x - r - 1:.1f},{y + r:.1f}"
            shape = f'<polygon points="{pts}"'
        self.add(f'{shape} fill="{colour}" stroke="white" stroke-width="0.8">{tip}</{shape.split()[0][1:]}>')

    def render(self):
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
                f'viewBox="0 0 {self.width} {self.height}" font-family={quoteattr(FONT)}>\n'
                f'<rect width="100%" height="100%" fill="white"/>\n')
        return head + "\n".join(self.parts) + "\n</svg>\n"


# ---------------------------------------------------------------- scales and labels


def fmt_rps(v):
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    if v >= 1e4:
        return f"{v / 1e3:.0f}k"
    if v >= 1e3:
        return f"{v / 1e3:.1f}k"
    return f"{v:.0f}"


def fmt_seconds(s):
    if s >= 1:
        return f"{s:g} s"
    if s >= 1e-3:
        return f"{s * 1e3:g} ms"
    return f"{s * 1e6:g} µs"


def wrap(text, width):
    lines, current = [], ""
    for word in text.split(" "):
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    return lines + [current]


# ---------------------------------------------------------------- the picture


def write_svg(path, title, command, shapes, server_names, rows):
    """rows: dicts from shapes.summarize (shape, server, rps, p50, p90, p99,
    p999, errors). Writes the SVG to path."""
    width = max(LEFT + COLUMN * len(shapes) + RIGHT, 720)
    c = Canvas(width, HEIGHT)
    colour = {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(server_names)}
    cell = {(r["shape"].key, r["server"]): r for r in rows}

    c.text(LEFT, 28, title, size=17, weight="bold")
    for i, line in enumerate(wrap(command, (width - LEFT) // 7)[:2]):
        c.text(LEFT, 48 + 15 * i, line, size=11, fill="#555")
    x = LEFT
    for name in server_names:
        c.line(x, 84, x + 22, 84, stroke=colour[name], width=2)
        c.marker(MARKERS[server_names.index(name) % len(MARKERS)], x + 11, 84, colour[name], name)
        c.text(x + 28, 88, name, size=12)
        x += 44 + 7.5 * len(name)

    draw_bars(c, shapes, server_names, cell, colour)
    draw_latency(c, shapes, server_names, cell, colour)
    with open(path, "w", encoding="utf-8") as f:
        f.write(c.render())


def column_x(i):
    return LEFT + COLUMN * i


def draw_bars(c, shapes, servers, cell, colour):
    bottom = BARS_TOP + BARS_HEIGHT
    right = column_x(len(shapes))
    # Shapes differ by orders of magnitude (pipelining against a connection per
    # request), so each shape gets its own scale: bar height is the share of the
    # shape's best rps, the label the absolute number. Ratios within a shape are
    # what a reader compares; across shapes the numbers mean different things.
    y_of = lambda share: bottom - BARS_HEIGHT * share  # noqa: E731

    c.text(LEFT, BARS_TOP - 20, "Throughput: requests/s per shape, median of rounds (higher is better; "
           "bar height relative to the shape's best)", size=13, weight="bold")
    for k in range(5):
        share = k / 4
        c.line(LEFT, y_of(share), right, y_of(share), stroke="#ddd" if k else "#222")
        c.text(LEFT - 6, y_of(share) + 4, f"{share:.0%}", size=11, anchor="end")
    c.line(LEFT, BARS_TOP, LEFT, bottom)
    c.text(22, BARS_TOP + BARS_HEIGHT / 2, "share of best rps", size=12, anchor="middle", rotate=-90)

    bar = min(40.0, (COLUMN - 30) / len(servers))
    for i, shape in enumerate(shapes):
        x0 = column_x(i) + (COLUMN - bar * len(servers)) / 2
        best = max([cell[(shape.key, n)]["rps"] or 0 for n in servers] + [1e-9])
        if i:
            c.line(column_x(i), BARS_TOP, column_x(i), bottom, stroke="#999", dash="3,3")
        errors = 0
        for j, name in enumerate(servers):
            row = cell[(shape.key, name)]
            rps = row["rps"] or 0
            errors += row["errors"]
            top = y_of(rps / best)
            c.rect(x0 + j * bar + 1, top, bar - 2, bottom - top, colour[name],
                   title=f"{shape.label}, {name}: {rps:.0f} requests/s")
            c.text(x0 + (j + 0.5) * bar, top - 4, fmt_rps(rps), size=10, anchor="middle")
        c.text(column_x(i) + COLUMN / 2, bottom + 17, shape.label, size=12, anchor="middle")
        if shape.open_loop:
            c.text(column_x(i) + COLUMN / 2, bottom + 31, "(rate fixed by the client)", size=10,
                   anchor="middle", fill="#666")
        if errors:
            c.text(column_x(i) + COLUMN / 2, bottom + 45, f"{errors} errors", size=10, anchor="middle",
                   fill="#C00000", weight="bold")


def draw_latency(c, shapes, servers, cell, colour):
    bottom = LAT_TOP + LAT_HEIGHT
    right = column_x(len(shapes))
    values = [cell[(s.key, n)][k] for s in shapes for n in servers for _, k in PERCENTILES]
    values = [v for v in values if v]
    lo = math.floor(math.log10(min(values) * 0.9)) if values else -4
    hi = math.ceil(math.log10(max(values) * 1.1)) if values else -2
    hi = max(hi, lo + 1)
    y_of = lambda v: bottom - LAT_HEIGHT * (math.log10(v) - lo) / (hi - lo)  # noqa: E731

    c.text(LEFT, LAT_TOP - 20, "Latency percentiles, median of rounds (log scale, lower is better)",
           size=13, weight="bold")
    for decade in range(lo, hi + 1):
        v = 10.0 ** decade
        c.line(LEFT, y_of(v), right, y_of(v), stroke="#bbb")
        c.text(LEFT - 6, y_of(v) + 4, fmt_seconds(v), size=11, anchor="end")
        if decade < hi:
            for m in (2, 5):
                c.line(LEFT, y_of(m * v), right, y_of(m * v), stroke="#eee")
    c.line(LEFT, LAT_TOP, LEFT, bottom)
    c.line(LEFT, bottom, right, bottom)
    c.text(22, LAT_TOP + LAT_HEIGHT / 2, "latency", size=12, anchor="middle", rotate=-90)

    pad = 22
    step = (COLUMN - 2 * pad) / (len(PERCENTILES) - 1)
    for i, shape in enumerate(shapes):
        if i:
            c.line(column_x(i), LAT_TOP, column_x(i), bottom, stroke="#999", dash="3,3")
        xs = [column_x(i) + pad + k * step for k in range(len(PERCENTILES))]
        for x, (name, key) in zip(xs, PERCENTILES):
            given = any(cell[(shape.key, n)][key] for n in servers)
            c.line(x, bottom, x, bottom + 4)
            c.text(x, bottom + 15, name, size=10, anchor="middle", fill="#222" if given else "#bbb")
        c.text(column_x(i) + COLUMN / 2, bottom + 32, shape.label, size=12, anchor="middle")
        for j, name in enumerate(servers):
            row = cell[(shape.key, name)]
            points = [(x, row[key], label) for x, (label, key) in zip(xs, PERCENTILES)]
            draw_series(c, points, y_of, colour[name], MARKERS[j % len(MARKERS)], f"{shape.label}, {name}")
    c.text(LEFT, HEIGHT - 14, "Points are missing where the tool gives no such percentile (wrk stops at p99). "
           "Hover a point or bar for its value.", size=10, fill="#666")


def draw_series(c, points, y_of, colour, marker, what):
    run = []
    for x, value, _ in points + [(None, None, None)]:
        if value:
            run.append((x, y_of(value)))
            continue
        if len(run) > 1:
            pts = " ".join(f"{px:.1f},{py:.1f}" for px, py in run)
            c.add(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2" '
                  f'stroke-linejoin="round"/>')
        run = []
    for x, value, label in points:
        if value:
            c.marker(marker, x, y_of(value), colour, f"{what}: {label} {fmt_seconds_precise(value)}")


def fmt_seconds_precise(s):
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.0f} µs"

"""The 2-D layer of viewer frames, drawn with Pillow on the rendered image (GGUI draws no text
offscreen): the pressure colour bar with tick labels and its unit, the overlay text, and the
tiled view of a batch (one panel per world, labelled with its index and the parameters that
differ between worlds).

Layout (pixels, image of width W and height H): a strip of STRIP_FRACTION W (at least
STRIP_MIN px) on the right holds the colour bar, 60 % of H tall and centred, with tick labels
left of it and the unit above it; in a tiled frame the panels fill the rest of the width and
the strip also holds the overlay; in a single frame the scene is drawn under the strip and the
overlay is a box at the top left. Text size: H / 36, in [9, 20] px."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["nice_ticks", "pressure_unit", "bar_layout", "strip_width", "compose", "tile", "parameter_labels"]

STRIP_FRACTION = 0.14
STRIP_MIN = 72  # [px]
BACKGROUND = (247, 247, 250)
_TEXT = (20, 20, 25)
_BOX = (255, 255, 255, 200)  # text boxes: white, 78 % opaque
_UNITS = ((1e9, "GPa"), (1e6, "MPa"), (1e3, "kPa"), (1.0, "Pa"))


def font_size(height: int) -> int:
    return int(min(20, max(9, round(height / 36))))


def _font(size: int):
    from PIL import ImageFont

    return ImageFont.load_default(size=size)  # Pillow's bundled FreeType font (no system fonts needed)


def nice_ticks(top: float, count: int = 6) -> np.ndarray:
    """About `count` round values (steps of 1, 2, 2.5 or 5 times a power of ten) from 0 to at
    most `top`; [0] when top <= 0."""
    if not top > 0 or not math.isfinite(top):
        return np.zeros(1)
    raw = top / max(count - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))
    return np.arange(0, math.floor(top / step * (1 + 1e-9)) + 1) * step


def pressure_unit(top: float) -> tuple[float, str]:
    """(factor [Pa], unit): the largest of GPa, MPa, kPa, Pa not above `top` [Pa] (Pa when top <= 0)."""
    return next(((f, u) for f, u in _UNITS if top >= f), (1.0, "Pa"))


def _format(value: float) -> str:
    return f"{value:.3g}"


def strip_width(width: int) -> int:
    return int(max(STRIP_MIN, round(STRIP_FRACTION * width)))


def bar_layout(size) -> dict:
    """Pixel boxes (x0, y0, x1, y1) of the colour bar ("bar"), its tick labels ("labels") and
    its unit ("unit") in an image of `size` (width, height)."""
    width, height = size
    fs = font_size(height)
    bar_w = max(8, fs)
    x1 = width - max(6, fs // 2)
    x0 = x1 - bar_w
    y0, y1 = int(0.2 * height), int(0.8 * height)
    return {"bar": (x0, y0, x1, y1), "labels": (width - strip_width(width), y0 - fs, x0 - 2, y1 + fs),
            "unit": (width - strip_width(width), y0 - 3 * fs, x1, y0 - fs)}


def _text_box(draw, xy, lines: list[str], fs: int) -> None:
    if not lines:
        return
    font = _font(fs)
    x, y = xy
    pad = max(2, fs // 4)
    step = int(fs * 1.25)
    width = max(draw.textlength(line, font=font) for line in lines)
    draw.rectangle((x, y, x + width + 2 * pad, y + step * len(lines) + pad), fill=_BOX)
    for k, line in enumerate(lines):
        draw.text((x + pad, y + pad + k * step), line, fill=_TEXT, font=font)


def _colour_bar(draw, size, p_max: float, colors: np.ndarray) -> None:
    """The bar (colors: (n, 3) in [0, 1], low to high pressure, drawn bottom to top), tick
    labels at round pressures in [0, p_max] [Pa] and the unit."""
    layout = bar_layout(size)
    x0, y0, x1, y1 = layout["bar"]
    n = len(colors)
    for k, c in enumerate(colors):
        top = y1 - (k + 1) * (y1 - y0) / n
        draw.rectangle((x0, round(top), x1 - 1, round(top + (y1 - y0) / n)), fill=tuple(int(255 * v + 0.5) for v in c))
    draw.rectangle((x0 - 1, y0 - 1, x1, y1), outline=(60, 60, 70))
    fs = font_size(size[1])
    font = _font(fs)
    factor, unit = pressure_unit(p_max)
    for tick in nice_ticks(p_max):
        y = y1 - (tick / p_max) * (y1 - y0) if p_max > 0 else y1
        draw.line((x0 - 4, y, x0 - 1, y), fill=_TEXT)
        draw.text((x0 - 6, y), _format(tick / factor), fill=_TEXT, font=font, anchor="rm")
    draw.text((x1, y0 - fs - 2), f"p [{unit}]", fill=_TEXT, font=font, anchor="rb")


def compose(image: np.ndarray, overlay: list[str], p_max: float | None, bar_colors: np.ndarray) -> np.ndarray:
    """A single-world frame: `image` (H, W, 3) uint8 with the overlay box at the top left and,
    when p_max [Pa] is given, the colour bar."""
    from PIL import Image, ImageDraw

    base = Image.fromarray(image).convert("RGBA")
    layer = Image.new("RGBA", base.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(layer)
    fs = font_size(base.size[1])
    _text_box(draw, (4, 4), overlay, fs)
    if p_max is not None:
        _colour_bar(draw, base.size, p_max, bar_colors)
    return np.asarray(Image.alpha_composite(base, layer).convert("RGB"))


def panel_grid(size, rows: int, cols: int) -> list[tuple[int, int, int, int]]:
    """Pixel boxes (x0, y0, x1, y1) of the panels of a tiled frame of `size`, row by row: the
    width left of the colour bar strip split into `cols`, the height into `rows`."""
    width, height = size
    pw, ph = (width - strip_width(width)) // cols, height // rows
    return [(c * pw, r * ph, (c + 1) * pw, (r + 1) * ph) for r in range(rows) for c in range(cols)]


def tile(panels: list[np.ndarray], rows: int, cols: int, size, labels: list[list[str]], overlay: list[str],
         p_max: float | None, bar_colors: np.ndarray) -> np.ndarray:
    """A tiled frame of `size` (width, height): panel images (each the size of panel_grid's
    boxes) row by row, each labelled at its top left, a 2 px separator between panels, and the
    strip on the right with the overlay and (when p_max [Pa] is given) the colour bar."""
    from PIL import Image, ImageDraw

    width, height = size
    base = Image.new("RGBA", (width, height), BACKGROUND + (255,))
    boxes = panel_grid(size, rows, cols)
    for img, (x0, y0, _, _) in zip(panels, boxes):
        base.paste(Image.fromarray(img).convert("RGBA"), (x0, y0))
    layer = Image.new("RGBA", base.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(layer)
    fs = font_size(height)
    small = max(9, round(0.9 * fs))
    for (x0, y0, x1, y1), text in zip(boxes, labels):
        draw.rectangle((x0, y0, x1 - 1, y1 - 1), outline=(90, 90, 100), width=2)
        _text_box(draw, (x0 + 4, y0 + 4), text, small)
    _text_box(draw, (width - strip_width(width) + 2, 4), overlay, small)
    if p_max is not None:
        _colour_bar(draw, size, p_max, bar_colors)
    return np.asarray(Image.alpha_composite(base, layer).convert("RGB"))


_PARAMETER_UNITS = {"mass": "kg", "friction": "", "dissipation": "s/m", "modulus": "Pa"}


def parameter_labels(parameters: dict, body_names: list[str], worlds: list[int], most: int = 3) -> list[list[str]]:
    """Per world of `worlds`, label lines naming the parameters (Simulator.parameters()) that
    differ between those worlds, e.g. "mass box_upper 0.21 kg", "gravity z -9.7 m/s^2"; at
    most `most` lines each, then "+k more"."""
    lines = {w: [] for w in worlds}
    for key, unit in _PARAMETER_UNITS.items():
        if key not in parameters:
            continue
        values = np.asarray(parameters[key])[worlds]
        for b in range(values.shape[1]):
            column = values[:, b]
            if np.all(np.isnan(column)) or np.nanmax(column) - np.nanmin(column) <= 1e-12 * np.nanmax(np.abs(column)):
                continue
            for w, v in zip(worlds, column):
                lines[w].append(f"{key} {body_names[b]} {v:.3g} {unit}".rstrip())
    gravity = np.asarray(parameters["gravity"])[worlds] if "gravity" in parameters else np.zeros((len(worlds), 0))
    for axis in range(gravity.shape[1]):
        if np.ptp(gravity[:, axis]) > 0:
            for w, v in zip(worlds, gravity[:, axis]):
                lines[w].append(f"gravity {'xyz'[axis]} {v:.3g} m/s^2")
    out = []
    for w in worlds:
        extra = lines[w][most:]
        out.append(lines[w][:most] + ([f"+{len(extra)} more"] if extra else []))
    return out

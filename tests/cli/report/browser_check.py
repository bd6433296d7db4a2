"""Checks Chromium's screenshot of an `axonn report` page: every chart is drawn, and the page loaded
nothing from outside.

  browser_check.py PAGE.html SCREENSHOT.png CHROMIUM.log

Drawn: the plot areas are found in the screenshot as the regions of the plot background colour
(report/chart.hpp's kPlotBackground, 245,247,250); there must be one per <svg class="chart"> of the
page, and each must hold data pixels (saturated colours: the series' lines and bars).
Loaded nothing: the page has the Content-Security-Policy meta tag (default-src 'none') and no URL,
and Chromium's log (--enable-logging=stderr) has no blocked load (a CSP violation) and no failed
request. Exit 0 when all holds; otherwise 1, with one line per failure."""
import re
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from png_read import read_png  # noqa: E402

PLOT = (245, 247, 250)
CELL = 8  # the plot areas are found on a grid of 8x8-pixel cells


def plot_regions(width, height, channels, rows):
    """Bounding boxes (x0, y0, x1, y1) of the connected areas of plot-background cells."""
    cw, ch = width // CELL, height // CELL
    plot = bytearray(cw * ch)
    target = bytes(PLOT)
    for cy in range(ch):
        for sy in (2, 6):  # two rows of each cell, every second pixel: enough to tell a plot cell
            row = rows[cy * CELL + sy]
            for cx in range(cw):
                hits = 0
                for sx in range(0, CELL, 2):
                    at = (cx * CELL + sx) * channels
                    hits += row[at:at + 3] == target
                if hits >= 2:
                    plot[cy * cw + cx] = 1
    seen, boxes = bytearray(cw * ch), []
    for start in range(cw * ch):
        if not plot[start] or seen[start]:
            continue
        stack, seen[start] = [start], 1
        x0 = x1 = start % cw
        y0 = y1 = start // cw
        n = 0
        while stack:
            i = stack.pop()
            n += 1
            x, y = i % cw, i // cw
            x0, x1, y0, y1 = min(x0, x), max(x1, x), min(y0, y), max(y1, y)
            for j in (i - 1 if x > 0 else -1, i + 1 if x < cw - 1 else -1, i - cw, i + cw):
                if 0 <= j < cw * ch and plot[j] and not seen[j]:
                    seen[j] = 1
                    stack.append(j)
        if x1 - x0 >= 20 and y1 - y0 >= 10:  # at least 160x80 pixels: a plot area, not a stray patch
            boxes.append((x0 * CELL, y0 * CELL, (x1 + 1) * CELL, (y1 + 1) * CELL))
    return boxes


def data_pixels(box, channels, rows):
    """Saturated pixels in the box and a margin of 4 (bars of zero height lie on its edge), every second."""
    x0, y0, x1, y1 = box
    n = 0
    for y in range(max(0, y0 - 4), min(len(rows), y1 + 4)):
        row = rows[y]
        for x in range(max(0, x0 - 4), min(len(row) // channels, x1 + 4), 2):
            r, g, b = row[x * channels:x * channels + 3]
            if max(r, g, b) - min(r, g, b) >= 60:
                n += 1
    return n


def main(page, screenshot, log):
    failures = []
    html = open(page, encoding="utf-8").read()
    charts = len(re.findall(r'<svg [^>]*class="chart"', html))
    csp = ("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
           "style-src 'unsafe-inline'; img-src data:\">")
    if csp not in html:
        failures.append("the page lacks the Content-Security-Policy meta tag")
    url = re.search(r"[a-zA-Z][a-zA-Z0-9+.-]*://|\bsrc\s*=|\bhref\s*=|url\(|@import", html)
    if url:
        failures.append("the page has a URL or a reference to load: %r" % url.group(0))
    text = open(log, encoding="utf-8", errors="replace").read()
    for line in text.splitlines():
        if re.search(r"Content Security Policy|Refused to|net::ERR_|Failed to load resource", line):
            failures.append("Chromium blocked a load or a request failed: %s" % line.strip()[:300])
    width, height, channels, rows = read_png(screenshot)
    boxes = plot_regions(width, height, channels, rows)
    if len(boxes) != charts:
        failures.append("the screenshot shows %d plot areas, the page has %d charts" % (len(boxes), charts))
    for i, box in enumerate(boxes):
        n = data_pixels(box, channels, rows)
        if n < 25:
            failures.append("plot area %d at %s has %d data pixels: nothing drawn" % (i, box, n))
    for f in failures:
        print("browser check: " + f)
    if not failures:
        print("ok: %d charts drawn (%s data pixels), nothing loaded" %
              (charts, ", ".join(str(data_pixels(b, channels, rows)) for b in boxes)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))

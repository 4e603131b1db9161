"""The HTML report of `kiln tune --model --report DIR` as a browser shows it: a real job's
page rendered by headless Chromium (Debian's chromium, scripts/setup-deps) at 1400 and
800 px. Checked on the rendered page, not the HTML text: screenshots of the expected
size that are not blank, and a measuring script's view of the laid-out DOM (nothing
wider than the window, the headline on the first screen, charts drawn at a readable
size with distinct tick labels, the task table sorted by share).
Usage: render_test.py KILN MODEL.onnx"""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

MEASURE = r"""
<pre id="kiln-check"></pre>
<script>
const out = {};
out.scrollWidth = document.documentElement.scrollWidth;
out.innerWidth = window.innerWidth;
const headline = document.getElementById('headline');
out.headlineTop = headline ? headline.getBoundingClientRect().top : -1;
out.headlineText = headline ? headline.innerText : '';
out.charts = [...document.querySelectorAll('svg.chart')].map(svg => {
  const r = svg.getBoundingClientRect();
  return {width: r.width, height: r.height, right: r.right,
          yticks: [...svg.querySelectorAll('text.ytick')].map(t => t.textContent),
          lines: svg.querySelectorAll('polyline').length, markers: svg.querySelectorAll('circle.marker').length};
});
const shares = document.getElementById('shares');
out.shareBars = shares ? shares.querySelectorAll('rect.share').length : 0;
out.shareWidth = shares ? shares.getBoundingClientRect().width : 0;
out.tableShares = [...document.querySelectorAll('#tasks tr')].slice(1).map(tr => tr.children[6].textContent);
document.getElementById('kiln-check').textContent = JSON.stringify(out);
</script>
"""


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browser(args):
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"] + args,
                          capture_output=True, text=True, timeout=120)


def png_facts(path):
    """(width, height, share of pixels that are not white) of an 8-bit RGB(A) PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, width, height, chunks = 8, 0, 0, []
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), f"PNG depth {depth} color {color}"
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    rows, previous, inked = 0, bytearray(stride), 0
    for y in range(height):
        filter_type, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):  # undo the PNG row filter
            a = line[i - channels] if i >= channels else 0
            b = previous[i]
            c = previous[i - channels] if i >= channels else 0
            if filter_type == 1:
                line[i] = (line[i] + a) & 255
            elif filter_type == 2:
                line[i] = (line[i] + b) & 255
            elif filter_type == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif filter_type == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y % 4 == 0:
            for x in range(0, width, 4):
                px = line[x * channels:x * channels + 3]
                inked += min(px) < 200
            rows += 1
        previous = line
    return width, height, inked / max(1, rows * ((width + 3) // 4))


def main():
    kiln, model = sys.argv[1], sys.argv[2]
    if chromium() is None:
        print("no chromium: install Debian's chromium (scripts/setup-deps does)", file=sys.stderr)
        return 1
    work = tempfile.mkdtemp()
    try:
        report = os.path.join(work, "report")
        job = subprocess.run([kiln, "tune", "--model", model, "--trials", "96", "--batch", "8", "--warmup-batch", "8", "--repeat", "2",
                              "--min-repeat-ms", "1", "--db", os.path.join(work, "k.db"), "--report", report, "-q"],
                             capture_output=True, text=True, timeout=900)
        assert job.returncode == 0, job.stdout + job.stderr
        page = os.path.join(report, "index.html")
        html = open(page).read()
        assert "<script" not in html, "the report itself has no scripts"
        measured = os.path.join(work, "measured.html")
        open(measured, "w").write(html.replace("</body>", MEASURE + "</body>"))
        failures = []
        for width in (1400, 800):
            shot = os.path.join(work, f"shot{width}.png")
            r = browser([f"--window-size={width},2400", f"--screenshot={shot}", "file://" + page])
            assert os.path.exists(shot), r.stderr[-2000:]
            w, h, ink = png_facts(shot)
            print(f"{width} px: screenshot {w}x{h}, {100 * ink:.1f}% inked")
            if (w, h) != (width, 2400) or not 0.02 < ink < 0.6:
                failures.append(f"{width} px: screenshot {w}x{h}, {ink:.3f} of it inked")
            dom = browser([f"--window-size={width},1000", "--dump-dom", "file://" + measured]).stdout
            found = re.search(r'<pre id="kiln-check">(.*?)</pre>', dom, re.S)
            if not found:
                failures.append(f"{width} px: the measuring script left nothing")
                continue
            facts = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
            print(f"{width} px: {json.dumps(facts)[:600]}")
            if facts["scrollWidth"] > facts["innerWidth"]:
                failures.append(f"{width} px: the page is {facts['scrollWidth']} px wide, wider than the window")
            if not 0 <= facts["headlineTop"] < 300:
                failures.append(f"{width} px: the headline starts at {facts['headlineTop']} px")
            if "faster tuned than untuned" not in facts["headlineText"]:
                failures.append(f"{width} px: the headline lacks the speedup: {facts['headlineText']!r}")
            if len(facts["charts"]) < 3:
                failures.append(f"{width} px: {len(facts['charts'])} charts")
            for k, chart in enumerate(facts["charts"]):
                if chart["width"] < 250 or chart["height"] < 120 or chart["right"] > facts["innerWidth"]:
                    failures.append(f"{width} px: chart {k} drawn at {chart['width']}x{chart['height']}")
                if chart["lines"] == 0:
                    continue  # a task the job gave no program: the chart says so instead
                if len(set(chart["yticks"])) != len(chart["yticks"]) or len(chart["yticks"]) < 2:
                    failures.append(f"{width} px: chart {k} y ticks {chart['yticks']}")
                if chart["yticks"] and float(chart["yticks"][0]) != 0:
                    failures.append(f"{width} px: chart {k}'s y axis starts at {chart['yticks'][0]}")
            if facts["charts"] and facts["charts"][0]["markers"] != 1:
                failures.append(f"{width} px: the final estimate is not on the curve")
            shares = [float(s.rstrip("%")) for s in facts["tableShares"] if s.endswith("%")]
            if not shares or shares != sorted(shares, reverse=True):
                failures.append(f"{width} px: the task table is not sorted by share: {facts['tableShares']}")
            if facts["shareBars"] != len(facts["tableShares"]) or facts["shareWidth"] < 300:
                failures.append(f"{width} px: {facts['shareBars']} share bars, {facts['shareWidth']} px wide")
        for failure in failures:
            print("FAILED:", failure, file=sys.stderr)
        return 1 if failures else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""`--format html`, opened in a real headless Chromium with the network blocked: the plots render,
no script error, the evidence is there, hostile text from a log stays inert text; one file that
needs nothing from the network; long inputs downsampled with their extremes kept.

The browser is a required part of the suite (scripts/bootstrap --test installs Debian's
`chromium`): without one these tests fail, they do not skip."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, run_cli

ARTIFACTS = ROOT / "tests" / "artifacts"


def _browser() -> str:
    for name in (os.environ.get("DIAGNOSE_BROWSER"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    pytest.fail("no headless browser: install Debian's chromium (sh scripts/bootstrap --test does), "
                "or point DIAGNOSE_BROWSER at one")


def _open(page: Path, screenshot: Path | None = None) -> str:
    """The page's DOM after its scripts ran, loaded offline: every host resolves nowhere and any
    proxy request goes to a closed port."""
    args = [_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP * ~NOTFOUND",
            "--proxy-server=http://127.0.0.1:9", "--virtual-time-budget=5000", "--window-size=1280,2400"]
    if screenshot:
        subprocess.run([*args, f"--screenshot={screenshot}", page.as_uri()], capture_output=True, timeout=120)
    p = subprocess.run([*args, "--dump-dom", page.as_uri()], capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    return p.stdout.decode("utf-8", "replace")


def _body(dom: str) -> dict:
    tag = re.search(r"<body([^>]*)>", dom).group(1)
    return dict(re.findall(r'data-([a-z-]+)="([^"]*)"', tag))


def _report(tmp_path: Path, *inputs) -> Path:
    out = tmp_path / "report.html"
    p = run_cli("--format", "html", "-o", out, *inputs)
    assert p.returncode in (0, 1), p.stderr.decode()
    return out


def test_the_report_renders_every_plot_in_a_browser_offline(tmp_path):
    page = _report(tmp_path, FIXTURES / "seed003" / "realtime.log", FIXTURES / "seed003" / "dmon.txt")
    html = page.read_text()
    # one file: no script, style, font or image from anywhere else
    assert not re.search(r'(src|href)\s*=\s*"?(https?:)?//', html)
    assert len(html.encode()) <= 1_500_000
    ARTIFACTS.mkdir(exist_ok=True)
    dom = _open(page, screenshot=ARTIFACTS / "html-report-seed003.png")
    body = _body(dom)
    assert body.get("errors") == "0", body.get("error-text")
    # engine panels (requests, KV, throughput) and the GPU ones (SM, memory controller, power)
    assert int(body["plots"]) >= 5 and dom.count("<canvas") >= int(body["plots"])
    for rule in ("tp-for-small-model", "cuda-graphs-disabled", "client-bound"):
        assert rule in dom
    assert "realtime.log:12:" in dom and "tensor_parallel_size=4" in dom      # evidence lines, file:line
    assert 'data-copy="--tensor-parallel-size 1 --data-parallel-size 4"' in dom or "data-copy=\"--tensor-parallel-size 1\"" in dom
    assert (ARTIFACTS / "html-report-seed003.png").stat().st_size > 10_000


def test_hostile_text_from_a_log_stays_text(tmp_path):
    evil = '<script>document.body.dataset.pwned="1"</script></details><img src=x onerror="document.body.dataset.pwned=2">"\'\x07'
    log = tmp_path / "evil.log"
    log.write_text(
        "INFO 11-20 09:00:00 [api_server.py:1] vLLM API server version 0.11.0\n"
        "ERROR 11-20 09:00:05 [core.py:700] EngineCore failed to start.\n"
        "ERROR 11-20 09:00:05 [core.py:700] Traceback (most recent call last):\n"
        f"ERROR 11-20 09:00:05 [core.py:700] RuntimeError: {evil}\n")
    page = _report(tmp_path, log)
    dom = _open(page)
    body = _body(dom)
    assert "pwned" not in body and body.get("errors") == "0", body
    assert dom.count("<script") == 3                     # the data block, uPlot, the page's own
    assert "&lt;script&gt;document.body.dataset.pwned" in dom and "<img src=\"x\"" not in dom


def test_sweep_table_and_baseline_comparison_are_in_the_page(tmp_path):
    import sys
    sys.path.insert(0, str(ROOT / "bench"))
    from generate_sweep import write_sweep
    write_sweep(tmp_path / "before", [1, 2, 4, 8, 16, 32], 16)
    write_sweep(tmp_path / "after", [1, 2, 4, 8, 16, 32], 4)
    out = tmp_path / "r.html"
    p = run_cli("--format", "html", "-o", out, tmp_path / "after", "--baseline", tmp_path / "before")
    assert p.returncode in (0, 1), p.stderr.decode()
    html = out.read_text()
    assert "Load sweep" in html and "◀ knee" in html and "Compared with the baseline" in html
    assert "sweep output tok/s at concurrency 16" in html


def test_long_series_are_downsampled_with_their_extremes_kept():
    from datetime import datetime, timedelta
    from diagnose.evidence.model import Evidence
    from diagnose.signals.series import MAX_POINTS, plot_series
    ev = Evidence()
    t0 = datetime(2026, 11, 25, 8, 0, 0)
    n = 20_000
    for i in range(n):
        ev.add_stats({"time": t0 + timedelta(seconds=10 * i), "source": "x", "line": i + 1, "engine_idx": 0,
                      "running": 10.0 + (i % 7), "waiting": 500.0 if i == 12_345 else 0.0, "kv_usage": 40.0,
                      "gen_tps": 900.0, "prompt_tps": 300.0})
    panels = {p["title"]: p for p in plot_series(ev)}
    req = panels["Requests"]
    assert len(req["x"]) <= MAX_POINTS + 8
    assert max(v for v in req["series"][1]["y"] if v is not None) == 500.0      # the one spike of waiting
    from diagnose.signals.series import _epoch
    assert req["x"][0] == _epoch(t0) and req["x"][-1] == _epoch(t0 + timedelta(seconds=10 * (n - 1)))
    assert req["x"] == sorted(req["x"])


def test_several_deployments_get_an_overview_row_each(tmp_path):
    page = _report(tmp_path, FIXTURES / "mixed")
    html = page.read_text()
    overview = html.split("<h1>Overview</h1>", 1)[1].split("</table>", 1)[0]
    assert overview.count('<tr><td><a href="#a-') >= 2
    assert all(f'id="a-{i}"' in html for i in range(overview.count('<tr><td><a href="#a-')))


def test_findings_are_marked_on_the_time_axis_and_the_steady_window_shaded(tmp_path):
    """The crash's evidence lines carry their time: the plots mark it (beside the steady window the
    runtime findings rest on), and the page still draws without an error."""
    import json
    from datetime import datetime
    from diagnose.pipeline import analyze_all
    from diagnose.signals.series import _epoch, plot_marks
    a = analyze_all([str(FIXTURES / "rules" / "engine-crash" / "fires.log")])[0]
    m = plot_marks(a.evidence, a.signals, a.to_json()["findings"])
    crash = [x for x in m["marks"] if x["label"] == "engine-crash"]
    assert crash and all(x["t"] >= m["band"][1] for x in crash)      # after the steady window
    page = _report(tmp_path, FIXTURES / "rules" / "engine-crash" / "fires.log")
    data = json.loads(re.search(r'<script type="application/json" id="plot-data">(.*?)</script>', page.read_text(), re.S).group(1))
    assert data[0]["marks"] and data[0]["band"] == m["band"]
    body = _body(_open(page))
    assert body.get("errors") == "0" and int(body["plots"]) >= 3, body


def test_a_baseline_run_is_overlaid_on_the_same_axes(tmp_path):
    out = tmp_path / "r.html"
    p = run_cli("--format", "html", "-o", out, FIXTURES / "seed003" / "after.log", "--baseline", FIXTURES / "seed003" / "realtime.log")
    assert p.returncode in (0, 1), p.stderr.decode()
    import json
    data = json.loads(re.search(r'<script type="application/json" id="plot-data">(.*?)</script>', out.read_text(), re.S).group(1))
    assert {b["title"] for b in data[0]["before"]} >= {"Requests", "Throughput"}
    body = _body(_open(out))
    assert body.get("errors") == "0" and int(body["plots"]) >= 3, body


# -- many GPUs, finding labels, the deployment table ---------------------------------------------------
def _eight_gpus(tmp_path: Path) -> Path:
    """seed003's ten minutes of `nvidia-smi dmon` at 1 s on 4 GPUs, as 8: GPUs 4-7 are the same
    boards run hotter (a second half of the node doing more work)."""
    out = []
    for line in (FIXTURES / "seed003" / "dmon.txt").read_text().splitlines():
        out.append(line)
        f = line.split()
        if line.startswith("GPU ") and f[1] == "3:":
            out += [line.replace("GPU 3:", f"GPU {g}:").replace("04)", f"0{g + 1})") for g in range(4, 8)]
        elif len(f) > 8 and f[0].isdigit() and f[2].isdigit():
            g = int(f[2])
            out.append(" ".join(f[:2] + [str(g + 4), str(int(f[3]) + 20)] + f[4:6] + [str(min(100, int(f[6]) + 30))] + f[7:]))
    path = tmp_path / "dmon-8gpu.txt"
    path.write_text("\n".join(out) + "\n")
    return path


def _measured(page: Path, tmp_path: Path, script: str) -> dict:
    """The page with a script of the test's own run after the report's: what it measures lands on <body>."""
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body></html>", f"<script>{script}</script></body></html>"))
    return _body(_open(probe))


def _screenshot(page: Path, png: Path, height: int) -> None:
    """The Timeline and the Deployment table alone (what the README shows), in the browser the
    tests use."""
    only = page.with_name(page.stem + "-timeline.html")
    only.write_text(page.read_text().replace(
        "</head>", "<style>main>:not(.plots):not(table.kv):not(h2:has(+.plots)):not(h2:has(+table.kv)){display:none}</style></head>"))
    args = [_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP * ~NOTFOUND",
            "--proxy-server=http://127.0.0.1:9", "--virtual-time-budget=5000", f"--window-size=1280,{height}"]
    subprocess.run([*args, f"--screenshot={png}", only.as_uri()], capture_output=True, timeout=120)
    assert png.stat().st_size > 20_000


def test_many_gpus_are_their_mean_and_a_band_from_the_lowest_to_the_highest():
    from datetime import datetime, timedelta
    from diagnose.evidence.model import Evidence
    from diagnose.signals.series import MAX_GPU_LINES, plot_series
    t0 = datetime(2026, 11, 25, 8, 0, 0)

    def gpus(n: int):
        ev = Evidence()
        for s in range(600):                          # ten minutes, every second
            for g in range(n):
                if g == n - 1 and s == 300:           # the last GPU not sampled once: unknown, not 0
                    continue
                ev.gpu_rows.append({"time": t0 + timedelta(seconds=s), "gpu": g, "util": 40.0 + 5 * g + s % 3,
                                    "power_w": 300.0 + g})
        return {p["title"]: p for p in plot_series(ev)}

    few = gpus(MAX_GPU_LINES)["GPU SM utilisation"]
    assert [s["label"] for s in few["series"]] == [f"GPU {g}" for g in range(MAX_GPU_LINES)] and "band" not in few
    many = gpus(8)["GPU SM utilisation"]
    assert many["band"] == [2, 3]
    assert [s["label"] for s in many["series"]] == ["mean of 8 GPUs", "lowest GPU", "highest GPU"]
    mean, lo, hi = (s["y"] for s in many["series"])
    assert all(a <= m <= b for m, a, b in zip(mean, lo, hi))
    assert lo[0] == 40.0 and hi[0] == 75.0 and mean[0] == 57.5
    at = many["x"].index(many["x"][0] + 300)
    assert hi[at] == 40.0 + 5 * 6 + 0 and min(lo) == 40.0                    # GPU 7 missing: the band is of the 7 sampled


def test_eight_gpus_for_ten_minutes_draw_a_band_and_labels_that_neither_overlap_nor_leave_the_plot(tmp_path):
    import html
    import json
    page = _report(tmp_path, FIXTURES / "seed003" / "realtime.log", _eight_gpus(tmp_path))
    data = json.loads(re.search(r'<script type="application/json" id="plot-data">(.*?)</script>', page.read_text(), re.S).group(1))
    gpu = [p for p in data[0]["panels"] if p["title"].startswith("GPU ")]
    assert len(gpu) == 3 and all(p["series"][0]["label"] == "mean of 8 GPUs" and p["band"] == [2, 3] for p in gpu)
    assert all(len(p["series"]) == 3 for p in gpu)              # three lines, not eight
    # the deployment table: one grid of label/value pairs, every label and every value of a column at one x
    body = _measured(page, tmp_path, """
      var xs=function(sel){var s={};document.querySelectorAll(sel).forEach(function(c){s[Math.round(c.getBoundingClientRect().left)]=1});return Object.keys(s).length};
      var widths={};document.querySelectorAll('table.kv td').forEach(function(c){widths[Math.round(c.getBoundingClientRect().left)+':'+Math.round(c.getBoundingClientRect().width)]=1});
      document.body.dataset.kvTh=xs('table.kv th');document.body.dataset.kvTd=xs('table.kv td');document.body.dataset.kvTdShapes=Object.keys(widths).length;
      // the red of each label's text is inside the box it says it took
      var inked=[];document.querySelectorAll('.uplot[data-labels]').forEach(function(root){
        var cv=root.querySelector('canvas'),r=cv.width/cv.getBoundingClientRect().width,c=cv.getContext('2d');
        JSON.parse(root.dataset.labels).forEach(function(b){
          var d=c.getImageData(Math.round(b.x0*r),Math.round(b.y0*r),Math.max(1,Math.round((b.x1-b.x0)*r)),Math.round((b.y1-b.y0)*r)).data,red=0;
          for(var i=0;i<d.length;i+=4)if(d[i]>150&&d[i+1]<110&&d[i+2]<110)red++;inked.push(red)})});
      document.body.dataset.inked=inked.join(',');""")
    assert body.get("errors") == "0", body.get("error-text")
    assert (body["kv-th"], body["kv-td"], body["kv-td-shapes"]) == ("2", "2", "2"), body
    inked = [int(x) for x in body["inked"].split(",")]
    assert len(inked) >= 18 and min(inked) >= 30, inked          # 3 labels on each of 6 plots, each drawn in its box
    dom = _open(page)
    placed = [json.loads(html.unescape(x)) for x in re.findall(r'data-labels="([^"]*)"', dom)]
    assert len(placed) == int(_body(dom)["plots"]) >= 6
    for boxes in placed:
        assert {b["label"] for b in boxes} == {"cuda-graphs-disabled", "tp-over-pcie", "tp-for-small-model"}, boxes
        for b in boxes:                               # whole, inside the plot: nothing cut at either edge
            assert b["left"] - 0.5 <= b["x0"] < b["x1"] <= b["right"] + 0.5, b
        for a in boxes:
            for b in boxes:
                if a is not b and a["row"] == b["row"]:
                    assert a["x1"] <= b["x0"] or b["x1"] <= a["x0"], (a, b)
    ARTIFACTS.mkdir(exist_ok=True)
    _screenshot(page, ARTIFACTS / "html-report-8-gpus.png", 2000)

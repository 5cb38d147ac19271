"""`diagnose --prometheus URL`: end to end against a real Prometheus holding backfilled vLLM metrics.

One session-scoped Prometheus serves every scenario: tests/prom_harness.py writes all scenarios into
one OpenMetrics file (each series labelled namespace="<scenario>", instance, job="vllm"), promtool
backfills it into a fresh TSDB and `prometheus` serves it on 127.0.0.1:<free port>. A test picks its
scenario with --match '{namespace="<scenario>"}'. Error modes use prom_harness.BadServer.

Two groups:
* test_harness_*: check the harness itself (data shape, backfill, server start/stop, bad servers).
* test_cli_*: call the CLI as a user would and check the diagnosis / the error contract
  (exit 2, exactly one stderr line naming the URL, no traceback).

Everything that needs the Prometheus binaries FAILS when `prometheus`/`promtool` are not on PATH
(Debian: apt-get install prometheus; the README's test command installs it): a real Prometheus is a
required part of the suite, and a skip would let CI go green without testing it.
"""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest
import requests

from conftest import FIXTURES, ROOT, run_cli, one, report
from prom_harness import (REPLICA_DOWN_AFTER_S, SCENARIOS, BadServer, HarnessError, PromServer, backfill,
                          default_start, missing_tools, port_open, prom_query, write_openmetrics, write_openmetrics_all,
                          write_openmetrics_nvidia, write_openmetrics_sglang)

SINCE = "40m"             # every scenario holds 35 minutes of data ending about a minute before the run
SEVERITY_ORDER = {"critical": 0, "high": 1, "medium": 2, "low": 3, "info": 4}


# -- fixtures ---------------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _no_proxy_for_loopback(monkeypatch):
    """An HTTP(S)_PROXY in the environment must not capture the loopback servers (run_cli copies os.environ)."""
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(var, ",".join(x for x in ("127.0.0.1", "localhost", os.environ.get(var)) if x))


@pytest.fixture(scope="session")
def prom_tools():
    missing = missing_tools()
    if missing:
        pytest.fail(f"{' and '.join(missing)} not on PATH: the live Prometheus tests need the Prometheus "
                    f"server and promtool (Debian/Ubuntu: apt-get install prometheus)", pytrace=False)


class Live:
    def __init__(self, server: PromServer, data: dict):
        self.server = server
        self.data = data          # {scenario: ScenarioData}

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="session")
def prom(prom_tools, tmp_path_factory):
    """One Prometheus with every scenario backfilled; stopped at the end of the session."""
    base = tmp_path_factory.mktemp("prometheus")
    om = base / "all.om"
    data = write_openmetrics_all(om, start=default_start(), slow_scrape={"kv_saturated": 60},
                                 mixes={"two_models": ["healthy", "underloaded"], "one_cold": ["healthy", "idle"],
                                        "rolling_restart": ["replica_down", "replacement"]})
    backfill(om, base / "tsdb")
    om.unlink()                                   # ~30 MB of text; the blocks hold it now
    sg = base / "sglang.om"                       # other engines: their own blocks in the same TSDB
    data["sglang_retracting"] = write_openmetrics_sglang(sg, start=default_start())
    backfill(sg, base / "tsdb")
    sg.unlink()
    nv = base / "nvidia.om"
    data.update(write_openmetrics_nvidia(nv, start=default_start()))
    backfill(nv, base / "tsdb")
    nv.unlink()
    with PromServer(base / "tsdb", workdir=base / "server") as server:
        yield Live(server, data)


def _session() -> requests.Session:
    s = requests.Session()
    s.trust_env = False                           # never through a proxy
    return s


# -- harness: the OpenMetrics text -------------------------------------------------------------------
def _parse(text: str):
    """Minimal OpenMetrics reader: {(name, labels tuple): [(ts, value)]}, {family: type}, family order."""
    series, types, order = {}, {}, []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, fam, typ = line.split(" ", 3)
            assert fam not in types, f"family {fam} declared twice (families must be contiguous)"
            types[fam] = typ
            order.append(fam)
            continue
        if line.startswith("#"):
            continue
        head, value, ts = line.rsplit(" ", 2)
        name, _, rest = head.partition("{")
        labels = tuple(tuple(kv.split("=", 1)) for kv in rest.rstrip("}").split('",') if kv)
        labels = tuple((k, v.strip('"')) for k, v in labels)
        series.setdefault((name, labels), []).append((int(ts), float(value)))
    return series, types, order


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_harness_openmetrics_format(tmp_path, scenario):
    path = tmp_path / f"{scenario}.om"
    info = write_openmetrics(path, scenario, default_start(35), 35)
    text = path.read_text()
    assert text.endswith("# EOF\n") and text.count("# EOF") == 1
    series, types, order = _parse(text)
    assert (info.end - info.start) >= timedelta(minutes=30)
    assert {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
            "vllm:cache_config_info", "up"} <= {f for f, t in types.items() if t == "gauge"}
    assert {"vllm:prompt_tokens", "vllm:generation_tokens", "vllm:num_preemptions"} <= \
        {f for f, t in types.items() if t == "counter"}
    assert {"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds",
            "vllm:request_queue_time_seconds"} <= {f for f, t in types.items() if t == "histogram"}
    current = None
    for name, labels in series:                  # sample names belong to the family declared above them
        fam = max((f for f in order if name == f or name.startswith(f + "_")), key=len)
        if types[fam] == "counter":
            assert name == fam + "_total", name
        if types[fam] == "histogram":
            assert name in (fam + "_bucket", fam + "_sum", fam + "_count"), name
        assert current is None or order.index(fam) >= order.index(current), f"{name} after family {current}"
        current = fam
        lab = dict(labels)
        assert lab["namespace"] == scenario and lab["job"] == "vllm" and lab["instance"] in info.instances, labels
    for (name, labels), samples in series.items():
        ts = [t for t, _ in samples]
        assert ts == sorted(set(ts)), f"{name}{labels}: timestamps not strictly increasing"
        if name.endswith(("_total", "_bucket", "_count", "_sum")):
            vals = [v for _, v in samples]
            if scenario == "restart_in_place":   # one drop: the restart, counting again from zero
                drops = [i for i in range(1, len(vals)) if vals[i] < vals[i - 1]]
                assert len(drops) <= 1, f"{name}{labels}: drops at {drops}"
                vals = vals[drops[0]:] if drops else vals
            assert vals == sorted(vals), f"{name}{labels}: cumulative series decreases"
        if name == "vllm:kv_cache_usage_perc":
            assert all(0 <= v <= 1 for _, v in samples)
    # histogram buckets: cumulative in le, +Inf == _count at every timestamp
    for (name, labels), counts in series.items():
        if not name.endswith("_count"):
            continue
        fam = name[: -len("_count")]
        buckets = sorted((float(dict(lab)["le"]), s) for (n, lab), s in series.items()
                         if n == fam + "_bucket" and tuple(x for x in lab if x[0] != "le") == labels)
        assert buckets and math.isinf(buckets[-1][0]), name
        for i in range(len(counts)):
            col = [s[i][1] for _, s in buckets]
            assert col == sorted(col), f"{fam}: buckets not cumulative at sample {i}"
            assert col[-1] == counts[i][1], f"{fam}: +Inf bucket != _count"


def test_harness_write_openmetrics_takes_instances(tmp_path):
    info = write_openmetrics(tmp_path / "f.om", "fleet_one_hot", default_start(30), 30,
                             instances=["a.example:8000", "b.example:8000"])
    assert info.instances == ["a.example:8000", "b.example:8000"]
    assert 'instance="b.example:8000"' in (tmp_path / "f.om").read_text()
    with pytest.raises(ValueError):
        write_openmetrics(tmp_path / "g.om", "fleet_one_hot", default_start(30), 30, instances=["only-one:8000"])
    with pytest.raises(KeyError):
        write_openmetrics(tmp_path / "h.om", "no-such-scenario", default_start(30), 30)


# -- harness: promtool and the server ----------------------------------------------------------------
def test_harness_backfill_succeeds_and_reports_promtool_errors(prom_tools, tmp_path):
    om = tmp_path / "u.om"
    write_openmetrics(om, "underloaded", default_start(30), 30)
    out = backfill(om, tmp_path / "tsdb")
    assert "BLOCK ULID" in out
    assert list((tmp_path / "tsdb").glob("*/meta.json")), "no block written"
    bad = tmp_path / "bad.om"
    bad.write_text("# TYPE x gauge\nx 1 200\nx 2 100\n")            # no # EOF
    with pytest.raises(HarnessError, match="promtool backfill .* failed"):
        backfill(bad, tmp_path / "tsdb2")


def test_harness_prometheus_answers_with_backfilled_data(prom):
    r = _session().get(prom.url + "/api/v1/query", params={"query": 'vllm:num_requests_running{namespace="underloaded"}'},
                       timeout=10)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["status"] == "success"
    result = doc["data"]["result"]
    assert len(result) == 1, result
    m = result[0]["metric"]
    assert m == {"__name__": "vllm:num_requests_running", "engine": "0", "instance": "10.0.1.1:8000", "job": "vllm",
                 "model_name": "Qwen/Qwen3-VL-2B-Instruct", "namespace": "underloaded"}
    assert float(result[0]["value"][1]) == 8
    # a range query over the whole scenario (what the CLI does) returns every 15 s sample
    d = prom.data["underloaded"]
    r = _session().get(prom.url + "/api/v1/query_range", timeout=10, params={
        "query": 'vllm:kv_cache_usage_perc{namespace="underloaded"}', "start": d.start.timestamp(),
        "end": d.end.timestamp(), "step": "15s"})
    values = r.json()["data"]["result"][0]["values"]
    assert len(values) == int((d.end - d.start).total_seconds() // 15) + 1
    assert all(0.01 < float(v) < 0.02 for _, v in values)


# PromQL over each scenario's whole range, evaluated at its last sample: (query, per-instance expected [lo, hi]).
def _shape_checks(scn):
    W = "36m"
    s = '{namespace="%s"}' % scn
    run, wait, kv = (f"avg_over_time(vllm:num_requests_running{s}[{W}])", f"max_over_time(vllm:num_requests_waiting{s}[{W}])",
                     f"avg_over_time(vllm:kv_cache_usage_perc{s}[{W}])")
    gen, prompt = f"rate(vllm:generation_tokens_total{s}[{W}])", f"rate(vllm:prompt_tokens_total{s}[{W}])"
    pre = f"60 * rate(vllm:num_preemptions_total{s}[{W}])"
    ttft50 = f"histogram_quantile(0.5, sum by (instance, le) (rate(vllm:time_to_first_token_seconds_bucket{s}[{W}])))"
    itl_first = f"histogram_quantile(0.5, sum by (instance, le) (rate(vllm:inter_token_latency_seconds_bucket{s}[5m] offset 30m)))"
    itl_last = f"histogram_quantile(0.5, sum by (instance, le) (rate(vllm:inter_token_latency_seconds_bucket{s}[5m])))"
    prompt_per_req = f"rate(vllm:prompt_tokens_total{s}[{W}]) / rate(vllm:request_success_total{s}[{W}])"
    wait_first = f"vllm:num_requests_waiting{s} offset 34m"
    return {
        "underloaded": [(run, (8, 8)), (wait, (0, 0)), (kv, (0.014, 0.018)), (gen, (390, 435)), (prompt, (70, 86)),
                        (ttft50, (0.08, 0.12)), (pre, (0, 0))],
        "kv_saturated": [(kv, (0.95, 1.0)), (f"min_over_time(vllm:kv_cache_usage_perc{s}[{W}])", (0.95, 1.0)),
                         (wait, (20, 60)), (f"min_over_time(vllm:num_requests_waiting{s}[{W}])", (20, 60)),
                         (pre, (4, 6))],
        "queue_buildup": [(f"min_over_time(vllm:num_requests_running{s}[{W}])", (256, 256)), (wait, (280, 320)),
                          (wait_first, (0, 10)), (kv, (0.4, 0.6)), (pre, (0, 0))],
        "prefill_bound": [(run, (15, 20)), (f"avg_over_time(vllm:num_requests_waiting{s}[{W}])", (0, 0.2)),
                          (ttft50, (20, 85)), (prompt_per_req, (19000, 21000)),
                          (f"{prompt} / ({prompt} + {gen})", (0.95, 1.0)), (pre, (0, 0))],
        "decode_bound": [(itl_first, (0.04, 0.08)), (itl_last, (0.12, 0.18)), (ttft50, (0.2, 0.4)), (wait, (0, 0)),
                         (f"vllm:num_requests_running{s} offset 34m", (90, 115)), (f"vllm:num_requests_running{s}", (235, 260)),
                         (kv, (0.5, 0.8))],
        "healthy": [(run, (55, 65)), (wait, (0, 0)), (kv, (0.4, 0.7)), (ttft50, (0.15, 0.25)),
                    (f"histogram_quantile(0.99, sum by (instance, le) (rate(vllm:time_to_first_token_seconds_bucket{s}[{W}])))",
                     (0.6, 1.0)), (pre, (0, 0))],
        "idle": [(run, (0, 0)), (wait, (0, 0)), (kv, (0, 0)), (gen, (0, 0)), (prompt, (0, 0)),
                 (f"rate(vllm:time_to_first_token_seconds_count{s}[{W}])", (0, 0))],
    }.get(scn, [])


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if _shape_checks(s)])
def test_harness_scenario_shape(prom, scenario):
    at = prom.data[scenario].end
    for query, (lo, hi) in _shape_checks(scenario):
        result = prom_query(prom.url, query, at=at)
        assert result, f"{scenario}: no data for {query}"
        for r in result:
            v = float(r["value"][1])
            assert lo - 1e-9 <= v <= hi + 1e-9, f"{scenario}: {query} = {v}, expected {lo}..{hi}"


def test_harness_fleet_and_replica_down_shapes(prom):
    fleet = prom.data["fleet_one_hot"]
    a, b = fleet.instances
    at = fleet.end
    by = lambda q: {r["metric"]["instance"]: float(r["value"][1]) for r in prom_query(prom.url, q, at=at)}  # noqa: E731
    s = fleet.match
    run = by(f"avg_over_time(vllm:num_requests_running{s}[36m])")
    wait = by(f"avg_over_time(vllm:num_requests_waiting{s}[36m])")
    kv = by(f"avg_over_time(vllm:kv_cache_usage_perc{s}[36m])")
    assert 195 <= run[a] <= 205 and 17 <= run[b] <= 23
    assert 45 <= wait[a] <= 55 and wait[b] == 0
    assert 0.95 <= kv[a] <= 1.0 and 0.13 <= kv[b] <= 0.17

    down = prom.data["replica_down"]
    a, b = down.instances
    s = down.match
    n = {r["metric"]["instance"]: float(r["value"][1])
         for r in prom_query(prom.url, f"count_over_time(vllm:num_requests_running{s}[36m])", at=down.end)}
    assert n[a] == 141 and n[b] == 41, n           # B: samples for the first 10 minutes only
    up = {r["metric"]["instance"]: float(r["value"][1]) for r in prom_query(prom.url, f"up{s}", at=down.end)}
    assert up == {a: 1.0, b: 0.0}
    assert prom_query(prom.url, f'vllm:num_requests_running{{namespace="replica_down",instance="{b}"}}', at=down.end) == []


def test_harness_prom_server_starts_and_stops(prom_tools, tmp_path):
    with PromServer(tmp_path / "tsdb") as p:
        assert p.running and port_open(p.port)
        status = _session().get(p.url + "/-/ready", timeout=5).status_code
        assert status == 200
        pid, port = p.pid, p.port
        p.stop()                                  # mid-run stop, as the "server died" test does
        assert not p.running and p.proc.returncode is not None
        assert not port_open(port)
        with pytest.raises(requests.ConnectionError):
            _session().get(f"http://127.0.0.1:{port}/-/ready", timeout=2)
    p.stop()                                      # idempotent
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_harness_prom_server_reports_a_failed_start(prom_tools, tmp_path):
    bad = PromServer(tmp_path / "tsdb", extra_args=["--no-such-flag"], ready_timeout=10)
    with pytest.raises(HarnessError, match="exited"):
        with bad:
            pass
    assert not bad.running


# -- harness: BadServer -------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["unauthorized", "html", "garbage", "server_error"])
def test_harness_bad_server_modes(mode):
    with BadServer(mode) as bad:
        r = _session().get(bad.url + "/api/v1/query", params={"query": "up"}, timeout=5,
                           headers={"Authorization": "Bearer t0k"})
        assert bad.requests and bad.requests[0][1].startswith("/api/v1/query?query=up")
        assert bad.requests[0][2].get("Authorization") == "Bearer t0k"
        if mode == "unauthorized":
            assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
        elif mode == "html":
            assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
            assert "<html>" in r.text
        elif mode == "garbage":
            assert r.status_code == 200 and r.headers["Content-Type"] == "application/json"
            with pytest.raises(ValueError):
                json.loads(r.text)
        elif mode == "server_error":
            assert r.status_code == 500
    assert not port_open(bad.port)


def test_harness_bad_server_hang_holds_then_releases():
    with BadServer("hang") as bad:
        with pytest.raises(requests.exceptions.ReadTimeout):
            _session().get(bad.url + "/api/v1/query", params={"query": "up"}, timeout=1.5)
        assert len(bad.requests) == 1 and bad.released == 0, "the handler must still be hanging"
    # stopping releases the hanging handler instead of waiting out its hang
    assert bad.released == 1
    assert not port_open(bad.port)


def test_harness_bad_server_dies_midway(prom):
    with BadServer("dies_midway", upstream=prom.url, die_after=2) as bad:
        s = _session()
        for _ in range(2):
            r = s.get(bad.url + "/api/v1/query", params={"query": 'vllm:num_requests_running{namespace="healthy"}'},
                      timeout=5)
            assert r.status_code == 200 and r.json()["data"]["result"]
        with pytest.raises(requests.ConnectionError):
            _session().get(bad.url + "/api/v1/query", params={"query": "up"}, timeout=5)


# -- the CLI: diagnoses ---------------------------------------------------------------------------------
def _diagnose(prom, scenario, *extra):
    p = run_cli("--prometheus", prom.url, "--match", prom.data[scenario].match, "--since", SINCE,
                "--format", "json", *extra)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 0, f"exit {p.returncode}\n{err[-3000:]}"
    assert "Traceback" not in err, err[-3000:]
    try:
        return report(p.stdout)
    except ValueError:
        pytest.fail(f"stdout is not JSON:\n{p.stdout.decode(errors='replace')[:2000]}\nstderr:\n{err[-2000:]}")


def _single(d: dict) -> dict:
    assert len(d["analyses"]) == 1, f"expected one analysis, got {[a['instance'] for a in d['analyses']]}"
    return d["analyses"][0]


def _bottleneck(a: dict):
    v = a.get("verdict")
    return v.get("bottleneck") if isinstance(v, dict) else v


def _ids(a: dict) -> list:
    return [f["id"] for f in a.get("findings") or []]


def _all_ids(node) -> set:
    """Finding ids anywhere in the report (top level, fleet section, per-instance analyses)."""
    out = set()
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "findings" and isinstance(v, list):
                out |= {f.get("id") for f in v if isinstance(f, dict)}
            else:
                out |= _all_ids(v)
    elif isinstance(node, list):
        for v in node:
            out |= _all_ids(v)
    return out


def _summary(a: dict) -> str:
    return json.dumps({"verdict": a.get("verdict"), "findings": [(f["id"], f["severity"]) for f in a.get("findings") or []],
                       "keys": sorted(a)}, default=str)[:2000]


EXPECT = {   # scenario: (finding ids of which at least one must fire, or None; verdict bottleneck)
    "underloaded": ({"client-bound"}, "client-bound"),
    "kv_saturated": ({"kv-cache-pressure"}, "kv-capacity-bound"),
    "queue_buildup": ({"queue-buildup", "concurrency-cap"}, "queue-saturated"),
    "prefill_bound": ({"prefill-bound"}, "prefill-bound"),
    "decode_bound": (None, "decode-bound"),
}


@pytest.mark.parametrize("scenario", list(EXPECT))
def test_cli_diagnoses_scenario(prom, scenario):
    want_any, verdict = EXPECT[scenario]
    a = _single(_diagnose(prom, scenario))
    if want_any:
        assert want_any & set(_ids(a)), f"{scenario}: none of {sorted(want_any)} fired: {_summary(a)}"
    assert _bottleneck(a) == verdict, f"{scenario}: {_summary(a)}"


@pytest.mark.parametrize("scenario,verdict", [("healthy", "healthy"), ("idle", "idle")])
def test_cli_quiet_scenarios_have_nothing_above_info(prom, scenario, verdict):
    a = _single(_diagnose(prom, scenario))
    loud = [(f["id"], f["severity"]) for f in a.get("findings") or [] if SEVERITY_ORDER[f["severity"]] < SEVERITY_ORDER["info"]]
    assert not loud, f"{scenario}: {loud}"
    assert _bottleneck(a) == verdict, f"{scenario}: {_summary(a)}"


def test_cli_explicit_start_end_and_step(prom):
    d = prom.data["underloaded"]
    start = d.start.strftime("%Y-%m-%dT%H:%M:%SZ")
    end = d.end.strftime("%Y-%m-%dT%H:%M:%SZ")
    p = run_cli("--prometheus", prom.url, "--match", d.match, "--start", start, "--end", end, "--step", "30s",
                "--format", "json")
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    a = _single(report(p.stdout))
    assert "client-bound" in _ids(a) and _bottleneck(a) == "client-bound", _summary(a)


def test_cli_fleet_one_hot_has_per_instance_analyses_and_imbalance(prom):
    d = _diagnose(prom, "fleet_one_hot")
    analyses = d.get("analyses")
    assert isinstance(analyses, list) and len(analyses) == 2, f"keys {sorted(d)}"
    for inst in prom.data["fleet_one_hot"].instances:
        assert any(inst in json.dumps(a, default=str) for a in analyses), f"no analysis names {inst}"
    fleet_ids = {f.get("id") for f in d.get("findings") or []} | \
                {f.get("id") for f in (d.get("fleet") or {}).get("findings") or []}
    assert "replica-imbalance" in fleet_ids, f"fleet-level findings: {sorted(fleet_ids)}; all: {sorted(_all_ids(d))}"


def test_cli_replica_down(prom):
    d = _diagnose(prom, "replica_down")
    assert "replica-down" in _all_ids(d), sorted(_all_ids(d))
    assert prom.data["replica_down"].instances[1] in json.dumps(d, default=str), "the down replica is not named"


# -- the CLI: failures ---------------------------------------------------------------------------------
def _assert_clean_failure(p, hostport: str):
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 2, f"exit {p.returncode}\nstderr:\n{err[-3000:]}"
    assert "Traceback" not in err, err[-3000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one stderr line, got {len(lines)}:\n{err[-3000:]}"
    assert hostport in lines[0], f"stderr does not name {hostport}: {lines[0]}"


def _fail_cli(url, *extra):
    return run_cli("--prometheus", url, "--match", '{namespace="healthy"}', "--since", SINCE, "--format", "json", *extra)


def test_cli_server_stopped(prom_tools, tmp_path):
    with PromServer(tmp_path / "tsdb") as p:
        url, port = p.url, p.port
        p.stop()
        p2 = _fail_cli(url, "--timeout", "5")
    _assert_clean_failure(p2, f"127.0.0.1:{port}")


@pytest.mark.parametrize("mode", ["unauthorized", "html", "garbage", "server_error"])
def test_cli_bad_server(mode):
    with BadServer(mode) as bad:
        p = _fail_cli(bad.url, "--timeout", "5")
        assert bad.requests, "the CLI never contacted the server"
    _assert_clean_failure(p, f"127.0.0.1:{bad.port}")


def test_cli_hang_times_out(tmp_path):
    with BadServer("hang") as bad:
        p = _fail_cli(bad.url, "--timeout", "5")
    # how long it takes is measured by bench/hostile_lines.py
    _assert_clean_failure(p, f"127.0.0.1:{bad.port}")


def test_cli_token_file_is_sent(tmp_path):
    tok = tmp_path / "token"
    tok.write_text("s3cret-token\n")
    with BadServer("unauthorized") as bad:
        p = _fail_cli(bad.url, "--timeout", "5", "--prometheus-token-file", tok)
        auth = {h.get("Authorization") for _, _, h in bad.requests}
    _assert_clean_failure(p, f"127.0.0.1:{bad.port}")
    assert "Bearer s3cret-token" in auth, auth
    assert "s3cret-token" not in p.stderr.decode(), "the token leaked into stderr"


def test_cli_server_dies_midway_without_partial(prom):
    with BadServer("dies_midway", upstream=prom.url, die_after=1) as bad:
        p = _fail_cli(bad.url, "--timeout", "5")
    _assert_clean_failure(p, f"127.0.0.1:{bad.port}")


# Needs product support whose output shape is not specified yet (where a partial fetch is reported).
def test_cli_partial_reports_what_was_fetched(prom):
    # forwarded: the metric names, the scrape-interval probe, then two range queries
    with BadServer("dies_midway", upstream=prom.url, die_after=4) as bad:
        p = run_cli("--prometheus", bad.url, "--match", prom.data["healthy"].match, "--since", SINCE,
                    "--format", "json", "--timeout", "5", "--partial")
        assert bad.forwarded == 4
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 0, err[-3000:]
    assert "Traceback" not in err
    d = report(p.stdout)
    text = json.dumps(d, default=str).lower()
    assert "partial" in text or d.get("errors") or f"127.0.0.1:{bad.port}" in err, \
        "the report does not say that part of the data could not be fetched"
    assert d.get("signals") or d.get("analyses") or d.get("findings") is not None


def test_cli_baseline_window_compares_two_windows_of_the_same_server(prom):
    """Issue 7: a Prometheus window as the baseline — the healthy scenario's first half against
    its second half: the same load, so no signal may come out worse."""
    from datetime import timedelta
    d0 = prom.data["healthy"]
    start = d0.start.replace(tzinfo=None)
    mid = start + timedelta(minutes=17)
    end = start + timedelta(minutes=35)
    p = run_cli("--prometheus", prom.url, "--match", d0.match, "--start", mid.isoformat(), "--end", end.isoformat(),
                "--baseline-window", f"{start.isoformat()},{mid.isoformat()}", "--fail-on-regression", "--format", "json")
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    c = report(p.stdout)["comparison"]
    assert c["signals"] and all(s["verdict"] in ("unchanged", "inconclusive", "better") for s in c["signals"].values()), c["signals"]
    assert c["config_changes"] == []


# -- issue 23: the right window, the right counts -----------------------------------------------------
TIME_ZONES = ["UTC", "Europe/Berlin", "America/New_York"]


def _cli_tz(tz: str, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", COLUMNS="120", TZ=tz)
    return subprocess.run([sys.executable, "-m", "diagnose", *map(str, args)], capture_output=True, env=env,
                          cwd=ROOT, timeout=300)


def _json_ok(p: subprocess.CompletedProcess) -> dict:
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-3000:]
    return report(p.stdout)


@pytest.mark.parametrize("tz", TIME_ZONES)
def test_cli_relative_window_is_the_last_minutes_in_any_time_zone(prom, tz):
    """`--since` counts back from now whatever the machine's zone: a KV-saturated server reads as
    such (a window shifted by the zone's offset held no data, or the wrong hour)."""
    d = prom.data["kv_saturated"]
    a = _single(_json_ok(_cli_tz(tz, "--prometheus", prom.url, "--match", d.match, "--since", SINCE, "--format", "json")))
    assert "kv-cache-pressure" in _ids(a) and _bottleneck(a) == "kv-capacity-bound", _summary(a)


@pytest.mark.parametrize("tz", TIME_ZONES)
@pytest.mark.parametrize("form", ["Z", "+02:00", "naive"])
def test_cli_explicit_start_without_end_in_any_time_zone(prom, tz, form):
    d = prom.data["kv_saturated"]
    start = d.start.astimezone(timezone.utc)
    text = {"Z": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "+02:00": start.astimezone(timezone(timedelta(hours=2))).isoformat(),
            "naive": start.strftime("%Y-%m-%dT%H:%M:%S")}[form]          # naive = UTC, as Prometheus shows
    a = _single(_json_ok(_cli_tz(tz, "--prometheus", prom.url, "--match", d.match, "--start", text, "--format", "json")))
    assert "kv-cache-pressure" in _ids(a) and _bottleneck(a) == "kv-capacity-bound", _summary(a)


def _preemptions_in_title(a: dict) -> int:
    f = next(f for f in a["findings"] if f["id"] == "kv-cache-pressure")
    m = re.search(r"(\d+) preemption\(s\)", f["title"])
    assert m, f["title"]
    return int(m.group(1))


@pytest.mark.parametrize("scenario,step", [("kv_saturated", "15s"), ("kv_saturated", "1m"), ("kv_saturated", "5m"),
                                           ("kv_saturated-60s", "15s"), ("kv_saturated-60s", "2m")])
def test_cli_preemption_count_is_the_counters_growth_at_any_step(prom, scenario, step):
    """The count in the headline finding is what the counter grew by in the window, whatever the
    step and the scrape interval (it was ×4 at 15 s and ÷5 at 5 m)."""
    d = prom.data[scenario]
    start, end = d.start.astimezone(timezone.utc), d.end.astimezone(timezone.utc)
    truth = d.counter_increase("vllm:num_preemptions_total", start.timestamp(), end.timestamp())
    assert truth > 100                                       # the scenario preempts 5 a minute
    a = _single(_json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match", d.match, "--format", "json",
                                 "--start", start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                 "--end", end.strftime("%Y-%m-%dT%H:%M:%SZ"), "--step", step)))
    got = _preemptions_in_title(a)
    assert abs(got - truth) <= 0.05 * truth, f"{got} preemptions reported, the counter grew by {truth:g}"


def test_cli_throughput_is_known_with_a_60s_scrape_interval(prom):
    """A [1m] rate over 60 s scrapes holds one sample: throughput vanished. Windows now hold four."""
    d = prom.data["kv_saturated-60s"]
    a = _single(_json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match", d.match, "--since", SINCE,
                                 "--format", "json")))
    gen = a["signals"]["generation_throughput"]
    assert gen["mean"] is not None and gen["mean"] > 0, gen
    # and it agrees with the same server scraped every 15 s, within 10 %
    b = _single(_diagnose(prom, "kv_saturated"))
    ref = b["signals"]["generation_throughput"]["mean"]
    assert abs(gen["mean"] - ref) <= 0.10 * ref, (gen, ref)


def test_cli_long_window_widens_the_step_instead_of_failing(prom):
    """--since 2d at 15 s is 11,520 points, over Prometheus' 11,000 per query: the step widens and
    the report says so."""
    d = prom.data["healthy"]
    out = _json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match", d.match, "--since", "2d", "--format", "json"))
    notes = [e for i in _single(out)["inputs"] for e in i.get("errors", [])]
    assert any(n.startswith("step widened to 18s") for n in notes), notes


def test_cli_model_name_reaches_the_report_and_the_corrected_command(prom):
    """The model comes from the series' model_name label (aggregations used to drop it): the
    deployment names it and the corrected command serves it, with or without --model."""
    d = prom.data["queue_buildup"]          # its fix raises a cap: there is a corrected command
    for extra in ((), ("--model", d.model_name)):
        a = _single(_json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match", d.match, "--since", SINCE,
                                     "--format", "json", *extra)))
        assert a["deployment"]["model"] == d.model_name, a["deployment"]
        cmd = (a.get("fix") or {}).get("command") or ""
        assert cmd.startswith("vllm serve") and d.model_name in cmd and "MODEL" not in cmd, cmd


def test_cli_sglang_retractions_are_the_counters_growth(prom):
    """SGLang's retractions come from its counter (sglang:num_retracted_requests_total), exactly;
    the gauge of the same name counts one interval and was summed as if it were a counter."""
    d = prom.data["sglang_retracting"]
    start, end = d.start.astimezone(timezone.utc), d.end.astimezone(timezone.utc)
    truth = d.counter_increase("sglang:num_retracted_requests_total", start.timestamp(), end.timestamp())
    assert truth > 50
    a = _single(_json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match", d.match, "--format", "json",
                                 "--start", start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                 "--end", end.strftime("%Y-%m-%dT%H:%M:%SZ"))))
    assert a["deployment"]["engine"] == "sglang" and a["deployment"]["model"] == d.model_name
    assert _preemptions_in_title(a) == truth


def test_cli_dynamo_frontend_saturated_is_queue_saturated_not_idle(prom):
    """Dynamo's frontend has its own metric names (dynamo_frontend_*): a deployment with 64 in flight
    and 60 queued was called idle. It reads as queue-saturated, with the model and the cap from the
    frontend's own series. (No KV usage there, so no rule may claim the cap rather than memory is
    the limit.)"""
    d = prom.data["dynamo_trtllm"]
    a = _single(_json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match", d.match, "--since", SINCE,
                                 "--format", "json")))
    assert _bottleneck(a) == "queue-saturated", _summary(a)
    assert a["signals"]["waiting"]["mean"] >= 50 and a["signals"]["running"]["mean"] == 64, a["signals"]
    assert 20 <= a["signals"]["ttft_p99"]["p50"] <= 40, a["signals"]["ttft_p99"]
    assert a["deployment"]["model"] == d.model_name and a["deployment"]["max_num_seqs"] == 64, a["deployment"]


def test_cli_triton_trtllm_saturated_kv_is_found(prom):
    """Triton's TensorRT-LLM backend: active/waiting requests and the KV block fraction come from
    labelled gauges; 97 % KV with 40 waiting is KV pressure (exit 1 under --fail-on low)."""
    d = prom.data["triton_trtllm"]
    p = _cli_tz("UTC", "--prometheus", prom.url, "--match", d.match, "--since", SINCE, "--format", "json",
                "--fail-on", "low")
    assert p.returncode == 1, p.stderr.decode(errors="replace")[-2000:]
    a = _single(report(p.stdout))
    assert "kv-cache-pressure" in _ids(a) and _bottleneck(a) == "kv-capacity-bound", _summary(a)
    assert a["deployment"]["engine"] == "trtllm" and a["deployment"]["max_num_seqs"] == 64, a["deployment"]


def test_cli_series_without_activity_gauges_are_unknown_not_idle(prom):
    """Only latency histograms that do not move and no queue gauges: nothing says whether it served,
    so the verdict is unknown, never idle."""
    d = prom.data["triton_trtllm"]
    # the KV fraction alone: no running, waiting, throughput or latency
    p = _cli_tz("UTC", "--prometheus", prom.url, "--match", d.match[:-1] + ',kv_cache_block_type="fraction"}',
                "--since", SINCE, "--format", "json")
    a = _single(_json_ok(p))
    assert _bottleneck(a) == "unknown", _summary(a)


# -- issue 23 item 6: credentials and errors ----------------------------------------------------------
import base64                      # noqa: E402
import shutil                      # noqa: E402
import socket                      # noqa: E402
import xml.etree.ElementTree as ET  # noqa: E402

PW_USER, PW_PASS = "diag-user", "s3cr@t/pw"          # `@` and `/` inside the password: percent-encoded in the URL
PW_USERINFO = "diag-user:s3cr%40t%2Fpw"
FORMATS = ["terminal", "markdown", "json", "sarif", "junit"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _with_userinfo(url: str, userinfo: str = PW_USERINFO) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{userinfo}@{rest}"


def _error_line(p) -> str:
    """Exit 2 and exactly one stderr line, no traceback: the line, without `diagnose: `."""
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 2, f"exit {p.returncode}\n{err[-3000:]}"
    assert "Traceback" not in err and "internal error" not in err, err[-3000:]
    assert err.endswith("\n") and err.count("\n") == 1 and err.startswith("diagnose: "), err[-3000:]
    return err[len("diagnose: "):-1]


def _no_credentials(text: str) -> None:
    for secret in ("s3cr", PW_PASS, PW_USERINFO, "diag-user:", "t%2Fpw", "@127.0.0.1"):
        assert secret not in text, f"{secret!r} shows in the output:\n{text[:3000]}"


@pytest.fixture(scope="session")
def tls_cert(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (openssl CLI; Debian: the openssl package, which
    ca-certificates pulls in). Missing openssl fails, as a missing Prometheus does."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl not on PATH: the TLS tests make their certificate with it (apt-get install openssl)",
                    pytrace=False)
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return str(cert), str(key)


def test_harness_bad_server_proxy_and_tls(prom, tls_cert):
    with BadServer("proxy", upstream=prom.url, tls=tls_cert) as bad:
        assert bad.url.startswith("https://")
        r = _session().get(bad.url + "/api/v1/query", params={"query": "up"}, timeout=5, verify=tls_cert[0],
                           headers={"Authorization": "Basic eDp5"})
        assert r.status_code == 200 and r.json()["status"] == "success"
        with pytest.raises(requests.exceptions.SSLError):            # not trusted without its certificate
            _session().get(bad.url + "/api/v1/query", params={"query": "up"}, timeout=5)
        r = _session().get(bad.url + "/api/v1/query", params={"query": "up"}, timeout=5, verify=tls_cert[0])
        assert r.status_code == 200                                   # a failed handshake stalled nothing
    assert bad.requests[0][2].get("Authorization") == "Basic eDp5"
    assert not port_open(bad.port)


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_password_in_url_is_sent_and_never_shown(prom, tmp_path, fmt):
    """`http://user:pass@host`: basic auth on every request, and neither the password nor the
    `user:pass@` form in any format's report, nor on stderr, nor in an --output file."""
    d = prom.data["kv_saturated"]
    out = tmp_path / f"report.{fmt}"
    with BadServer("proxy", upstream=prom.url) as bad:
        p = run_cli("--prometheus", _with_userinfo(bad.url), "--match", d.match, "--since", SINCE, "--format", fmt)
        p_out = run_cli("--prometheus", _with_userinfo(bad.url), "--match", d.match, "--since", SINCE, "--format", fmt,
                        "--output", out)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 0 and p_out.returncode == 0, err[-3000:] + p_out.stderr.decode(errors="replace")[-3000:]
    text = p.stdout.decode() + err + p_out.stdout.decode() + p_out.stderr.decode() + out.read_text()
    _no_credentials(text)
    assert bad.requests, "the CLI never contacted the server"
    want = "Basic " + base64.b64encode(f"{PW_USER}:{PW_PASS}".encode()).decode()
    assert {h.get("Authorization") for _, _, h in bad.requests} == {want}, "basic auth not sent on every request"
    assert "kv-cache-pressure" in p.stdout.decode(), "the diagnosis did not work through the credentials"
    if fmt == "json":
        a = _single(report(p.stdout))
        assert _bottleneck(a) == "kv-capacity-bound", _summary(a)
        assert a["inputs"][0]["path"] == f"{bad.url} instance={d.instances[0]}"
    if fmt in ("terminal", "markdown"):
        assert f"{bad.url} instance={d.instances[0]}" in p.stdout.decode()


def test_cli_password_in_url_never_in_an_error_line():
    port = _free_port()
    p = _fail_cli(_with_userinfo(f"http://127.0.0.1:{port}"), "--timeout", "5")
    assert _error_line(p) == f"http://127.0.0.1:{port}: cannot connect (connection refused: is Prometheus running?)"
    _no_credentials(p.stderr.decode() + p.stdout.decode())


def test_cli_password_in_url_is_sent_to_a_refusing_server():
    with BadServer("unauthorized") as bad:
        p = _fail_cli(_with_userinfo(bad.url), "--timeout", "5")
    line = _error_line(p)
    assert line == (f"{bad.url}: access refused (HTTP 401: Unauthorized); "
                    f"pass --prometheus-token-file or credentials"), line
    _no_credentials(line)
    want = "Basic " + base64.b64encode(f"{PW_USER}:{PW_PASS}".encode()).decode()
    assert [h.get("Authorization") for _, _, h in bad.requests] == [want]


def test_cli_prometheus_user_without_password_is_refused(monkeypatch):
    monkeypatch.delenv("DIAGNOSE_PROMETHEUS_PASSWORD", raising=False)
    with BadServer("unauthorized") as bad:
        p = _fail_cli(bad.url, "--timeout", "5", "--prometheus-user", "bob")
    assert _error_line(p) == ("--prometheus-user needs the password in the environment variable "
                              "DIAGNOSE_PROMETHEUS_PASSWORD (not set)")
    assert bad.requests == [], "a request went out (with the password 'None')"


def test_cli_prometheus_user_sends_the_password_from_the_environment(monkeypatch):
    monkeypatch.setenv("DIAGNOSE_PROMETHEUS_PASSWORD", "env-s3cr3t")
    with BadServer("unauthorized") as bad:
        p = _fail_cli(bad.url, "--timeout", "5", "--prometheus-user", "bob")
    assert _error_line(p).startswith(f"{bad.url}: access refused (HTTP 401")
    assert "env-s3cr3t" not in p.stderr.decode() + p.stdout.decode()
    assert [h.get("Authorization") for _, _, h in bad.requests] == ["Basic " + base64.b64encode(b"bob:env-s3cr3t").decode()]


@pytest.mark.parametrize("how", ["user", "url"])
def test_cli_token_file_with_basic_auth_is_refused(monkeypatch, tmp_path, how):
    monkeypatch.setenv("DIAGNOSE_PROMETHEUS_PASSWORD", "pw")
    tok = tmp_path / "token"
    tok.write_text("t0ken\n")
    with BadServer("unauthorized") as bad:
        if how == "user":
            p = _fail_cli(bad.url, "--prometheus-token-file", tok, "--prometheus-user", "bob")
            want = "--prometheus-token-file and --prometheus-user: give one (a bearer token or basic auth), not both"
        else:
            p = _fail_cli(_with_userinfo(bad.url), "--prometheus-token-file", tok)
            want = "--prometheus-token-file and a user:password in the --prometheus URL: give one, not both"
    assert _error_line(p) == want
    assert bad.requests == []
    _no_credentials(p.stderr.decode())


def test_cli_prometheus_user_with_userinfo_in_url_is_refused(monkeypatch):
    monkeypatch.setenv("DIAGNOSE_PROMETHEUS_PASSWORD", "pw")
    p = _fail_cli(_with_userinfo(f"http://127.0.0.1:{_free_port()}"), "--prometheus-user", "bob")
    assert _error_line(p) == "--prometheus-user and a user:password in the --prometheus URL: give one, not both"


def test_cli_read_timeout_says_no_answer():
    with BadServer("hang") as bad:
        p = _fail_cli(bad.url, "--timeout", "2")
    assert _error_line(p) == f"{bad.url}: no answer within 2 s"


def test_cli_connection_refused_says_cannot_connect():
    port = _free_port()
    p = _fail_cli(f"http://127.0.0.1:{port}", "--timeout", "5")
    assert _error_line(p) == f"http://127.0.0.1:{port}: cannot connect (connection refused: is Prometheus running?)"


def test_cli_untrusted_tls_certificate(prom, tls_cert):
    with BadServer("proxy", upstream=prom.url, tls=tls_cert) as bad:
        p = _fail_cli(_with_userinfo(bad.url), "--timeout", "5")
    line = _error_line(p)
    # OpenSSL 3 says "self-signed certificate", 1.1 "self signed certificate"
    assert re.fullmatch(rf"{re.escape(bad.url)}: TLS certificate not trusted \(self[- ]signed certificate\); "
                        r"pass --insecure to skip verification", line), line
    assert bad.requests == [], "no request may pass an untrusted certificate"


def test_cli_insecure_skips_verification_without_a_warning_per_query(prom, tls_cert):
    d = prom.data["kv_saturated"]
    with BadServer("proxy", upstream=prom.url, tls=tls_cert) as bad:
        p = run_cli("--prometheus", _with_userinfo(bad.url), "--match", d.match, "--since", SINCE, "--format", "json",
                    "--insecure", "--timeout", "10")
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 0, err[-3000:]
    assert err == "", f"stderr is not quiet under --insecure:\n{err[:3000]}"
    a = _single(report(p.stdout))
    assert "kv-cache-pressure" in _ids(a) and _bottleneck(a) == "kv-capacity-bound", _summary(a)
    assert len(bad.requests) > 3
    _no_credentials(p.stdout.decode())


def test_cli_https_to_a_plain_http_server():
    with BadServer("html") as bad:
        url = bad.url.replace("http://", "https://")
        p = _fail_cli(url, "--timeout", "5")
    assert _error_line(p) == f"{url}: TLS handshake failed (wrong version number): is it a plain http:// server?"


@pytest.mark.parametrize("url,shown", [
    ("127.0.0.1:9090", "127.0.0.1:9090"),
    ("prom.example:9090", "prom.example:9090"),
    (f"{PW_USERINFO}@prom.example:9090", "prom.example:9090"),     # no scheme, and the password stays hidden
    ("ftp://prom.example:9090", "ftp://prom.example:9090"),
    ("http://", "http://"),
])
def test_cli_url_without_http_scheme(url, shown):
    p = _fail_cli(url, "--timeout", "5")
    assert _error_line(p) == f"--prometheus: URL needs http:// or https:// (got {shown!r})"
    _no_credentials(p.stderr.decode())


def test_cli_url_with_an_unreadable_port_does_not_show_the_password():
    p = _fail_cli("http://diag-user:s3cr@t:pw@127.0.0.1:90x0", "--timeout", "5")
    assert _error_line(p) == "--prometheus: not a valid URL: 'http://127.0.0.1:90x0' (host or port unreadable)"


@pytest.mark.parametrize("value,says", [("0", "must be > 0 (got 0)"), ("-1", "must be > 0 (got -1)"),
                                        ("-0.5", "must be > 0 (got -0.5)"), ("nan", "must be > 0 (got nan)"),
                                        ("inf", "must be at most 1000000 s (got inf)")])
def test_cli_timeout_must_be_positive(value, says):
    p = _fail_cli(f"http://127.0.0.1:{_free_port()}", "--timeout", value)
    assert _error_line(p) == f"--timeout {says}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_partial_notes_show_in_every_format(prom, fmt):
    """The `partial data (--partial): …` note is in every report, not only in JSON."""
    with BadServer("dies_midway", upstream=prom.url, die_after=4) as bad:
        p = run_cli("--prometheus", _with_userinfo(bad.url), "--match", prom.data["healthy"].match, "--since", SINCE,
                    "--format", fmt, "--timeout", "5", "--partial")
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-3000:]
    out = p.stdout.decode()
    _no_credentials(out + p.stderr.decode())
    note = re.compile(r"partial data \(--partial\): \S+ and later queries could not be fetched; "
                      r"the report uses what was fetched")
    where = f"{bad.url} instance={prom.data['healthy'].instances[0]}"
    if fmt == "json":
        assert any(note.fullmatch(e) for e in _single(report(out))["inputs"][0]["errors"]), out[:3000]
    elif fmt == "terminal":
        flat = " ".join(out.split())               # rich wraps long lines
        assert re.search(r"note: " + note.pattern, flat), out[-3000:]
    elif fmt == "markdown":
        assert "## Notes on the inputs" in out
        assert re.search(rf"^- `{re.escape(where)}`: {note.pattern}$", out, re.M), out[-3000:]
    elif fmt == "sarif":
        import jsonschema
        schema = json.loads((ROOT / "tests" / "schemas" / "sarif-2.1.0.json").read_text())
        jsonschema.Draft4Validator(schema).validate(json.loads(out))
        notes = json.loads(out)["runs"][0]["invocations"][0]["toolExecutionNotifications"]
        assert any(n["level"] == "warning" and re.fullmatch(rf"{re.escape(where)}: {note.pattern}", n["message"]["text"])
                   for n in notes), notes
    else:
        props = ET.fromstring(out).findall("./testsuite/properties/property[@name='input-note']")
        assert any(re.fullmatch(rf"{re.escape(where)}: {note.pattern}", x.get("value")) for x in props), out[:3000]


def test_cli_fleets_are_grouped_by_model(prom):
    """Two deployments of different models scraped by one job are two fleets, not one: their loads
    are not compared (replica-imbalance across models was noise)."""
    members = prom.data["two_models"]
    d = _json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match", '{namespace="two_models"}', "--since", SINCE,
                         "--format", "json"))
    assert "replica-imbalance" not in _all_ids(d), _all_ids(d)
    models = {a["deployment"]["model"] for a in d["analyses"]}
    assert models == {m.model_name for m in members}, models


def test_cli_a_replica_with_zero_traffic_counts_in_the_imbalance(prom):
    """Two replicas of one model, one receiving nothing: the idle one is the imbalance, it must not
    drop out of the comparison."""
    healthy, idle = prom.data["one_cold"]
    d = _json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match", '{namespace="one_cold"}', "--since", SINCE,
                         "--format", "json"))
    fleet = d["fleet"]
    f = next((f for f in fleet["findings"] if f["id"] == "replica-imbalance"), None)
    assert f is not None, [x["id"] for x in fleet["findings"]]
    assert idle.instances[0] in f["title"] and healthy.instances[0] in f["title"], f["title"]


def test_cli_replica_gone_for_seven_minutes_is_down(prom):
    """A replica whose last scrape is 7 minutes before the window's end is down: the range query's
    5-minute lookback used to repeat its last values and hide it."""
    d = prom.data["replica_down"]
    start = d.start.astimezone(timezone.utc)
    end = start + timedelta(seconds=REPLICA_DOWN_AFTER_S + 7 * 60)
    out = _json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match", d.match, "--format", "json",
                           "--start", start.strftime("%Y-%m-%dT%H:%M:%SZ"), "--end", end.strftime("%Y-%m-%dT%H:%M:%SZ")))
    f = next((f for f in out["fleet"]["findings"] if f["id"] == "replica-down"), None)
    assert f is not None and d.instances[1] in f["title"], [x["id"] for x in out["fleet"]["findings"]]
    assert d.instances[0] not in f["title"], f["title"]


@pytest.mark.parametrize("scenario", ["prefill_bound", "underloaded"])
def test_cli_ttft_p95_is_the_windows_own_quantile(prom, scenario):
    """"TTFT p95" of a window is the quantile of the requests in it (the histogram's increase over
    the window), within 5 % of what the generator counted; not a mean of rolling 5-minute p95s."""
    d = prom.data[scenario]
    start, end = d.start.astimezone(timezone.utc), d.end.astimezone(timezone.utc)
    truth = d.window_quantile("vllm:time_to_first_token_seconds", 0.95, start.timestamp(), end.timestamp())
    a = _single(_json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match", d.match, "--format", "json", "--verbose",
                                 "--start", start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                 "--end", end.strftime("%Y-%m-%dT%H:%M:%SZ"))))
    got = a["signals"]["ttft_p95_window"]["value"]
    assert abs(got - truth) <= 0.05 * truth, (got, truth)


def _window(d, start_after_s: float = 0, end_after_s: float | None = None) -> tuple[str, str]:
    start = d.start.astimezone(timezone.utc) + timedelta(seconds=start_after_s)
    end = d.end.astimezone(timezone.utc) if end_after_s is None else d.start.astimezone(timezone.utc) + timedelta(seconds=end_after_s)
    return start.strftime("%Y-%m-%dT%H:%M:%SZ"), end.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_cli_rolling_restart_is_not_replica_down(prom):
    """An old replica stops and a new one comes up 30 s later (pods replaced one by one): routine,
    not a critical outage."""
    old, new = prom.data["rolling_restart"]
    out = _json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match", '{namespace="rolling_restart"}',
                           "--since", SINCE, "--format", "json"))
    assert "replica-down" not in _all_ids(out), sorted(_all_ids(out))


def test_cli_replica_down_since_before_the_window_is_named(prom):
    """B stopped 10 minutes into the data and Prometheus scrapes it as down since: a window that
    starts 20 minutes in holds no series of B at all, only up == 0. It is down, not absent."""
    d = prom.data["replica_down"]
    start, end = _window(d, start_after_s=20 * 60)
    out = _json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match", d.match, "--format", "json",
                           "--start", start, "--end", end))
    f = next((f for f in out["fleet"]["findings"] if f["id"] == "replica-down"), None)
    assert f is not None and d.instances[1] in f["title"], sorted(_all_ids(out))


def test_cli_single_server_silent_for_twenty_minutes_is_not_healthy(prom):
    """One server whose series stop 20 minutes before the window's end: it is down, said as such,
    not "healthy" from its last good minutes."""
    d = prom.data["replica_down"]
    stop = REPLICA_DOWN_AFTER_S
    start, end = _window(d, end_after_s=stop + 20 * 60)
    out = _json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match",
                           '{namespace="replica_down",instance="%s"}' % d.instances[1], "--format", "json",
                           "--start", start, "--end", end))
    f = next((f for f in out["fleet"]["findings"] if f["id"] == "replica-down"), None)
    assert f is not None and d.instances[1] in f["title"], sorted(_all_ids(out))
    assert f["severity"] == "critical"


# -- what users compare with the dashboards: stages, prompt length, prefix cache, DP spread -----------
def _span(d) -> tuple[float, float, list]:
    start, end = d.start.astimezone(timezone.utc), d.end.astimezone(timezone.utc)
    return start.timestamp(), end.timestamp(), ["--start", start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                                 "--end", end.strftime("%Y-%m-%dT%H:%M:%SZ")]


def test_cli_underloaded_reads_prompt_length_and_prefix_cache(prom):
    """Seed 003's server (8 running, KV 1.6 %): its prompts are short and 72 % come from the prefix
    cache. Both are fetched (within 5 % of what the generator counted), shown with the verdict's
    evidence, and nothing advises prefill tuning for prompts of a hundred tokens."""
    d = prom.data["underloaded"]
    t0, t1, window = _span(d)
    a = _single(_json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match", d.match, "--format", "json", *window)))
    hits = d.counter_increase("vllm:prefix_cache_hits_total", t0, t1)
    queries = d.counter_increase("vllm:prefix_cache_queries_total", t0, t1)
    prompt = d.window_mean("vllm:request_prompt_tokens", t0, t1)
    got_hit = a["signals"]["prefix_cache_hit_window"]["value"]
    got_len = a["signals"]["prompt_tokens_per_request_window"]["value"]
    assert abs(got_hit - 100 * hits / queries) <= 5, (got_hit, 100 * hits / queries)
    assert abs(got_len - prompt) <= 0.05 * prompt, (got_len, prompt)
    assert 90 <= prompt <= 105 and 70 <= got_hit <= 74, "the scenario itself changed"
    f = next(f for f in a["findings"] if f["id"] == "client-bound")
    said = json.dumps(f["evidence"])
    assert "prompt tokens per request" in said and "prefix cache hit rate" in said, said
    assert not {"prefill-bound", "chunked-prefill-off", "batched-tokens-small"} & set(_ids(a)), _ids(a)
    md = _cli_tz("UTC", "--prometheus", prom.url, "--match", d.match, "--format", "markdown", *window)
    text = md.stdout.decode()
    assert md.returncode == 0 and "| prefix-cache hit rate | 72 % of prompt tokens |" in text, text[-3000:]
    assert re.search(r"\| prompt length \| 9\d(\.\d)? tokens per request \|", text), text[-3000:]


@pytest.mark.parametrize("family,kind", [("vllm:request_prefill_time_seconds", "prefill_time"),
                                         ("vllm:request_decode_time_seconds", "decode_time"),
                                         ("vllm:e2e_request_latency_seconds", "e2e")])
def test_cli_request_stages_over_the_window(prom, family, kind):
    """Where a request's time goes (prefill, decode, end to end): the window's mean and p95 from the
    histograms' increase, within 5 % of the generator's counts; measured prefill time, not an
    estimate, is what the prefill-bound verdict cites."""
    d = prom.data["prefill_bound"]
    t0, t1, window = _span(d)
    a = _single(_json_ok(_cli_tz("America/New_York", "--prometheus", prom.url, "--match", d.match, "--format", "json", *window)))
    sig = a["signals"]
    mean, p95 = d.window_mean(family, t0, t1), d.window_quantile(family, 0.95, t0, t1)
    assert abs(sig[f"{kind}_mean_window"]["value"] - mean) <= 0.05 * mean, (sig[f"{kind}_mean_window"], mean)
    assert abs(sig[f"{kind}_p95_window"]["value"] - p95) <= 0.05 * p95, (sig[f"{kind}_p95_window"], p95)
    assert _bottleneck(a) == "prefill-bound" and "prefill" in a["verdict"]["signals"][0] \
        and "per request" in a["verdict"]["signals"][0], a["verdict"]


def test_cli_a_quantile_in_the_lowest_bucket_is_a_bound(prom):
    """The underloaded server queues for ~2 ms; vLLM's queue-time buckets start at 0.3 s, where
    histogram_quantile would invent 0.15 s for the median. The report says "≤ 0.3" and keeps the
    mean, which the sum and count give exactly."""
    d = prom.data["underloaded"]
    t0, t1, window = _span(d)
    a = _single(_json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match", d.match, "--format", "json", *window)))
    p50 = a["signals"]["queue_time_p50_window"]
    assert p50 == {"value": 0.3, "over": p50["over"], "at_most": True}, p50
    mean = d.window_mean("vllm:request_queue_time_seconds", t0, t1)
    assert abs(a["signals"]["queue_time_mean_window"]["value"] - mean) <= 0.05 * mean
    p = _cli_tz("UTC", "--prometheus", prom.url, "--match", d.match, *window)
    assert p.returncode == 0 and re.search(r"queue time +mean 0\.00\d+ · p50 ≤ 0\.3 ", p.stdout.decode()), p.stdout.decode()[-3000:]


def test_cli_kv_usage_is_the_fullest_data_parallel_engine(prom):
    """Two DP engines in one server, one at ~98 % KV and one at ~60 %: the report gives the fullest
    engine's usage (the average, ~79 %, hides the one about to evict) and how far apart they run."""
    d = prom.data["dp_skewed"]
    _t0, _t1, window = _span(d)
    a = _single(_json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match", d.match, "--format", "json", *window)))
    kv = a["signals"]["kv_cache_usage"]
    assert 96 <= kv["mean"] <= 99, kv
    spread = a["signals"]["kv_cache_usage_spread"]
    assert 30 <= spread["mean"] <= 44, spread
    assert any("fullest data-parallel engine" in s for s in a["verdict"]["signals"]), a["verdict"]


def test_saved_openmetrics_dump_reads_seconds_timestamps(tmp_path):
    """`promtool tsdb dump-openmetrics` (and this harness) stamp samples in seconds, the Prometheus
    text format in milliseconds: a dump read as milliseconds put 30 minutes into 2 seconds and
    multiplied every rate by 1000. Rates, prompt length and prefix-cache hits match the generator."""
    om = tmp_path / "underloaded.om"
    d = write_openmetrics(om, "underloaded", default_start(30), 30)
    a = one(run_cli(str(om), "--format", "json").stdout)
    t0, t1 = d.start.timestamp(), d.end.timestamp()
    gen = d.counter_increase("vllm:generation_tokens_total", t0, t1) / (t1 - t0)
    assert abs(a["signals"]["generation_throughput"]["mean"] - gen) <= 0.05 * gen, (a["signals"]["generation_throughput"], gen)
    hit = 100 * d.counter_increase("vllm:prefix_cache_hits_total", t0, t1) / d.counter_increase("vllm:prefix_cache_queries_total", t0, t1)
    assert abs(a["signals"]["prefix_cache_hit"]["mean"] - hit) <= 5, (a["signals"]["prefix_cache_hit"], hit)
    prompt = d.window_mean("vllm:request_prompt_tokens", t0, t1)
    assert abs(a["signals"]["prompt_tokens_per_request"]["mean"] - prompt) <= 0.05 * prompt
    start, end = re.search(r"(\d\d:\d\d:\d\d)–(\d\d:\d\d:\d\d)", a["verdict"]["window"]).groups()
    span = (datetime.strptime(end, "%H:%M:%S") - datetime.strptime(start, "%H:%M:%S")).total_seconds() % 86400
    assert span >= 25 * 60, a["verdict"]["window"]


def test_cli_a_restart_in_place_is_named_not_down(prom):
    """A server that restarts (90 s without samples, then serving again with counters from zero and
    a new process_start_time_seconds) is neither down nor a lost replica: the report names the
    restart and its time in every format, and the diagnosis stays healthy."""
    from prom_harness import RESTART_AT_S
    d = prom.data["restart_in_place"]
    t0, _t1, window = _span(d)
    a = _single(_json_ok(_cli_tz("Europe/Berlin", "--prometheus", prom.url, "--match", d.match, "--format", "json", *window)))
    assert "replica-down" not in _all_ids(a) and _bottleneck(a) == "healthy", _summary(a)
    notes = [e for i in a["inputs"] for e in i.get("errors") or [] if "restarted" in e]
    assert len(notes) == 1 and d.instances[0] in notes[0], a["inputs"]
    # said in the machine's zone (Berlin here), named
    from zoneinfo import ZoneInfo
    m = re.search(r"restarted at (\S+ \S+) (CET|CEST) ", notes[0])
    assert m, notes[0]
    said = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=ZoneInfo("Europe/Berlin"))
    back = t0 + RESTART_AT_S + 90              # the first sample after the gap
    assert abs(said.timestamp() - back) <= 60, (notes[0], back)
    md = _cli_tz("UTC", "--prometheus", prom.url, "--match", d.match, "--format", "markdown", *window).stdout.decode()
    assert "restarted at" in md, md[:2000]
    # Without a restart nothing is said.
    h = prom.data["healthy"]
    b = _single(_json_ok(_cli_tz("UTC", "--prometheus", prom.url, "--match", h.match, "--format", "json", *_span(h)[2])))
    assert not [e for i in b["inputs"] for e in i.get("errors") or [] if "restarted" in e], b["inputs"]


def test_cli_watch_queries_again_every_interval_until_sigint(prom):
    """--watch: one JSON report per interval over the sliding window, the second with no changes
    (the same data), then SIGINT: the final report and exit 0."""
    import selectors
    import signal
    d = prom.data["queue_buildup"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    p = subprocess.Popen([sys.executable, "-m", "diagnose", "--prometheus", prom.url, "--match", d.match, "--since", SINCE,
                          "--watch", "1s", "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    reports = []
    while len(reports) < 2 and sel.select(timeout=120):
        line = p.stdout.readline()
        if not line:
            break
        reports.append(report(line))
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert len(reports) == 2, err.decode()[-2000:]
    assert "queue-buildup" in reports[0]["changes"]["new"] and reports[1]["changes"] == {"new": [], "cleared": []}
    final = report(out.decode().strip().splitlines()[-1])
    assert p.returncode == 0 and final["final"] is True and "queue-buildup" in _all_ids(final), err.decode()[-2000:]


def test_a_match_with_bad_promql_syntax_fails_in_one_readable_line(prom):
    """`--match '{namespace=="x"}'` (== is no PromQL matcher): Prometheus answers 400 bad_data; the
    user reads its parse error, not the response body as a Python bytes repr."""
    p = run_cli("--prometheus", prom.url, "--match", '{namespace=="healthy"}', "--since", SINCE)
    err = p.stderr.decode()
    assert p.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("diagnose: --match {namespace==\"healthy\"}: not a label selector Prometheus accepts"), err
    assert 'parse error: unexpected "="' in err, err
    assert "b'" not in err and "\\\\" not in err and "Traceback" not in err, err


def test_metric_times_say_their_zone_and_a_logs_do_not():
    """Times from Prometheus and saved scrapes (Unix timestamps) say their zone — UTC with --utc;
    a log's clock is its host's, of no known zone, and is shown as written."""
    saved = FIXTURES / "rules" / "replica-down" / "quiet.prom"
    d = report(run_cli("-f", "json", "--utc", saved).stdout)
    assert all(a["verdict"]["window"].split("(")[0].rstrip().endswith("UTC") for a in d["analyses"]), d["analyses"][0]["verdict"]
    log = one(run_cli("-f", "json", FIXTURES / "seed003" / "realtime.log").stdout)
    assert "UTC" not in log["verdict"]["window"]


def test_live_prometheus_times_are_utc_and_said(prom):
    d = _diagnose(prom, "healthy", "--utc")
    a = _single(d)
    assert "UTC (" in a["verdict"]["window"], a["verdict"]["window"]

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
from datetime import timedelta

import pytest
import requests

from conftest import run_cli
from prom_harness import (SCENARIOS, BadServer, HarnessError, PromServer, backfill, default_start, missing_tools,
                          port_open, prom_query, write_openmetrics, write_openmetrics_all)

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
    data = write_openmetrics_all(om, start=default_start())
    backfill(om, base / "tsdb")
    om.unlink()                                   # ~30 MB of text; the blocks hold it now
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
        return json.loads(p.stdout)
    except ValueError:
        pytest.fail(f"stdout is not JSON:\n{p.stdout.decode(errors='replace')[:2000]}\nstderr:\n{err[-2000:]}")


def _single(d: dict) -> dict:
    if "analyses" in d and len(d["analyses"]) == 1:
        return d["analyses"][0]
    assert "findings" in d, f"expected one analysis, got keys {sorted(d)}"
    return d


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
    a = _single(json.loads(p.stdout))
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
    with BadServer("dies_midway", upstream=prom.url, die_after=2) as bad:
        p = run_cli("--prometheus", bad.url, "--match", prom.data["healthy"].match, "--since", SINCE,
                    "--format", "json", "--timeout", "5", "--partial")
        assert bad.forwarded == 2
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 0, err[-3000:]
    assert "Traceback" not in err
    d = json.loads(p.stdout)
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
    c = json.loads(p.stdout)["comparison"]
    assert c["signals"] and all(s["verdict"] in ("unchanged", "inconclusive", "better") for s in c["signals"].values()), c["signals"]
    assert c["config_changes"] == []

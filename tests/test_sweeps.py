"""Load sweeps (benchmark results at several loads): every tool's format read from real files, the
knee where the stated rule puts it, the recommended load meeting the targets, and the report's
`sweep` object as a CI job reads it."""
from __future__ import annotations

import json
import sys

import pytest

from conftest import FIXTURES, ROOT, analyze, run_cli, run_json, report

sys.path.insert(0, str(ROOT / "bench"))
from generate_sweep import sweep_runs, write_sweep  # noqa: E402

BENCH = FIXTURES / "bench"
AIPERF_SWEEP = BENCH / "aiperf-akamaslabs-g7-4500-conc-sweep"
VLLM_BURST = BENCH / "vllm-gunther520-llama31-8b-tp1-burst-sweep"


def _sweep(*paths, **kw) -> dict:
    d = analyze(*paths, **kw)
    assert "sweep" in d, [i["kind"] for i in d["inputs"]]
    return d


# -- each tool's format, from real files -------------------------------------------------------------
@pytest.mark.parametrize("path,tool,levels,first", [
    (VLLM_BURST, "vllm-bench-serve", 4, {"concurrency": 20, "output_tps": 483.7, "ttft_p99_ms": 287.7, "tpot_p50_ms": 25.6}),
    (BENCH / "vllm-er0080-opt125m-single-points", "vllm-bench-serve", 2, {"concurrency": 2, "failed": 0}),
    (BENCH / "sglang-datacrunch-research-llama33-70b-4xh200-rate-sweep", "sglang-bench-serving", 5,
     {"request_rate": 1, "output_tps": 537.4, "ttft_p50_ms": 85.7, "itl_p50_ms": 13.6}),
    (BENCH / "guidellm-danielkorat-qwen3-4b-tp2-synchronous", "guidellm", 1,
     {"concurrency": 1, "output_tps": 50.9, "ttft_p50_ms": 37.0, "tpot_p50_ms": 19.6, "failed": 0}),
    (BENCH / "genai-perf-wellflat-gptoss20b-c1", "genai-perf", 1, {"concurrency": 1, "ttft_p99_ms": 2342.1}),
    (BENCH / "aiperf-wellflat-gptoss20b-c1", "aiperf", 1, {"concurrency": 1, "output_tps": 54.6, "itl_p50_ms": 18.0}),
    (AIPERF_SWEEP, "aiperf", 12, {"concurrency": 16, "output_tps": 1792.2, "ttft_mean_ms": 28.7, "itl_mean_ms": 8.8}),
])
def test_every_tools_result_files_are_read(path, tool, levels, first):
    sw = _sweep(path)["sweep"]
    assert sw["tool"] == tool and len(sw["points"]) == levels
    for k, want in first.items():
        assert sw["points"][0][k] == pytest.approx(want, abs=0.05), k


def test_runs_of_another_workload_in_the_same_file_are_a_different_sweep():
    """SGLang appends every run to one JSONL: the random 1024/1024 sweep (5 rates) and a ShareGPT
    run at two rates must not be averaged together."""
    sw = _sweep(BENCH / "sglang-datacrunch-research-llama33-70b-4xh200-rate-sweep")["sweep"]
    assert [p["request_rate"] for p in sw["points"]] == [1, 2, 4, 8, 16]
    assert sw["other_runs"] == 2


def test_an_all_failed_run_has_unknown_latencies_not_zero():
    d = _sweep(BENCH / "vllm-er0080-opt125m-single-points" / "bench_serve_all_requests_failed_v0.25.1.json")
    p = d["sweep"]["points"][0]
    assert p["failed"] == 8 and p["completed"] == 0
    assert p["ttft_p99_ms"] is None and p["itl_p50_ms"] is None
    f = {x["id"]: x for x in d["findings"]}["bench-errors"]
    assert "every request of that run" in f["title"] and "not reachable" in f["fix"]["note"]


# -- the knee --------------------------------------------------------------------------------------
@pytest.mark.parametrize("knee,loads", [
    (4, [1, 2, 4, 8, 16, 32]),
    (16, [1, 2, 4, 8, 16, 32, 64, 128]),
    (64, [8, 16, 32, 64, 128, 256]),
    (48, [12, 24, 48, 96, 192]),
    (96, [16, 32, 64, 96, 128, 192, 256]),      # not only powers of two: 96 -> 192 is the doubling
])
def test_a_generated_sweep_gives_its_known_knee(tmp_path, knee, loads):
    write_sweep(tmp_path, loads, knee)
    sw = _sweep(tmp_path)["sweep"]
    assert sw["knee_concurrency"] == knee
    assert sw["recommended_concurrency"] == knee and sw["recommended_basis"] == "knee"


def test_a_request_rate_sweep_has_its_knee_in_requests_per_second(tmp_path):
    write_sweep(tmp_path, [0.5, 1, 2, 4, 8], 2, rate=True)
    sw = _sweep(tmp_path)["sweep"]
    assert sw["axis"] == "request_rate" and sw["knee_request_rate"] == 2 and sw["knee_concurrency"] is None


def test_real_sweeps_knees_by_the_rule():
    """The vLLM burst sweep: 80 -> 160 prompts adds 1.7 % throughput for 78 % more p99 TTFT; AIPerf:
    96 -> 192 adds 1.0 % while mean TTFT doubles. SGLang's 70B rate sweep never gains < 10 % per
    doubling: no knee, and not 'unsaturated' either (latency climbs 221 % on the last doubling)."""
    assert _sweep(VLLM_BURST)["sweep"]["knee_concurrency"] == 80
    assert _sweep(AIPERF_SWEEP)["sweep"]["knee_concurrency"] == 96
    d = _sweep(BENCH / "sglang-datacrunch-research-llama33-70b-4xh200-rate-sweep")
    assert d["sweep"]["knee_request_rate"] is None
    assert "bench-unsaturated" in d["passed"]


# -- targets ---------------------------------------------------------------------------------------
def test_the_recommended_concurrency_meets_the_targets_given():
    d = _sweep(FIXTURES / "rules" / "slo-infeasible" / "quiet")     # the AIPerf sweep + ITL <= 30 ms, TTFT <= 500 ms
    sw = d["sweep"]
    assert sw["recommended_concurrency"] == 128 and sw["recommended_basis"] == "targets"
    by = {p["concurrency"]: p for p in sw["points"]}
    assert by[128]["itl_mean_ms"] <= 30 and by[128]["ttft_mean_ms"] <= 500 and by[128]["meets_targets"]
    assert all(not p["meets_targets"] for c, p in by.items() if c > 128)
    # past-the-knee names the same load: one answer in every place
    f = {x["id"]: x for x in d["findings"]}["past-the-knee"]
    assert f["fix"]["flags"]["set"] == {"--max-num-seqs": "128"}


def test_targets_no_run_meets_say_how_far_off_and_what_would():
    d = _sweep(FIXTURES / "rules" / "slo-infeasible" / "fires")
    assert d["sweep"]["recommended_concurrency"] is None
    f = {x["id"]: x for x in d["findings"]}["slo-infeasible"]
    assert "concurrency 16" in f["title"] and "mean ITL 8.78 ms (target 5)" in f["title"]
    assert "1.76×" in f["fix"]["note"] and "measure lighter loads" in f["fix"]["note"]


# -- past the knee with the server's own log -----------------------------------------------------------
def test_production_below_the_knee_is_quiet_and_above_it_is_high(tmp_path):
    log = (FIXTURES / "rules" / "client-bound" / "quiet.log").read_text()
    running = analyze(FIXTURES / "rules" / "client-bound" / "quiet.log")
    quiet = tmp_path / "below"
    write_sweep(quiet, [1, 2, 4, 8, 16, 32, 64, 128], 32)
    (quiet / "server.log").write_text(log)
    d = analyze(quiet)
    assert "past-the-knee" in d["passed"], [f["id"] for f in d["findings"]]
    # the same log against a sweep whose knee is far below its running batch
    above = tmp_path / "above"
    write_sweep(above, [1, 2, 4, 8], 2)
    (above / "server.log").write_text(log)
    d = analyze(above)
    f = {x["id"]: x for x in d["findings"]}.get("past-the-knee")
    assert f and f["severity"] == "high" and "production runs at" in f["title"], (running["verdict"], d["findings"])


# -- the report ------------------------------------------------------------------------------------
def test_json_report_has_the_sweep_object_a_ci_job_reads(tmp_path):
    write_sweep(tmp_path, [1, 2, 4, 8, 16, 32, 64], 16, fail_from=32)
    d = run_json(tmp_path)
    sw = d["sweep"]
    assert set(sw) >= {"points", "knee_concurrency", "recommended_concurrency", "limit"}
    assert set(sw["points"][0]) >= {"concurrency", "output_tps", "request_tps", "ttft_p50_ms", "ttft_p99_ms",
                                    "tpot_p50_ms", "itl_p50_ms", "failed"}
    assert sw["knee_concurrency"] == 16 and sw["limit"] == "unknown"
    assert [p["concurrency"] for p in sw["points"]] == [1, 2, 4, 8, 16, 32, 64]
    assert sw["analysis"] == 0
    (a,) = d["analyses"]
    ids = {f["id"] for f in a["findings"]}
    assert {"bench-errors", "past-the-knee"} <= ids
    err = next(f for f in a["findings"] if f["id"] == "bench-errors")
    assert err["evidence"][0]["source"].endswith("vllm-concurrency32.json") and "failed" in err["evidence"][0]["text"]


def test_markdown_and_terminal_show_the_table_with_the_knee_marked(tmp_path):
    write_sweep(tmp_path, [1, 2, 4, 8, 16, 32], 8)
    md = run_cli("--format", "markdown", tmp_path).stdout.decode()
    assert "## Load sweep" in md
    row = next(ln for ln in md.splitlines() if ln.startswith("| 8 |"))
    assert "◀ knee" in row and "★ recommended" in row
    term = run_cli(tmp_path).stdout.decode()
    assert "Load sweep" in term and "◀ knee" in term and "doubling it adds < 10 %" in term


def test_a_sweep_with_no_knee_yet_asks_for_the_next_loads(tmp_path):
    write_sweep(tmp_path, [1, 2, 4, 8], None)
    d = analyze(tmp_path)
    f = {x["id"]: x for x in d["findings"]}["bench-unsaturated"]
    assert "Extend the sweep to 16 and 32" == f["fix_title"]
    assert d["sweep"]["recommended_concurrency"] is None


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-1", '"fast"', "null", "[]", "{}"])
def test_odd_values_in_a_result_file_are_unknown_not_a_crash(tmp_path, value):
    runs = sweep_runs([1, 2, 4, 8], 2)
    for r in runs:
        for k in ("output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "completed"):
            r[k] = "__X__"
    for i, r in enumerate(runs):
        (tmp_path / f"r{i}.json").write_text(json.dumps(r).replace('"__X__"', value))
    p = run_cli("--format", "json", tmp_path)
    assert p.returncode in (0, 1) and b"Traceback" not in p.stderr, p.stderr.decode()
    report(p.stdout)


def test_with_the_server_log_the_knee_is_explained_by_the_engines_cap(tmp_path):
    """A sweep whose knee sits at the engine's `max_num_seqs` (64, from the server log beside it):
    the limit is the cap, not the hardware, and past-the-knee does not advise the cap it already has."""
    write_sweep(tmp_path, [8, 16, 32, 64, 128, 256], 64)
    (tmp_path / "server.log").write_bytes((FIXTURES / "rules" / "concurrency-cap" / "fires.log").read_bytes())
    d = analyze(tmp_path)
    assert d["sweep"]["limit"] == "max_num_seqs"
    f = {x["id"]: x for x in d["findings"]}
    assert "--max-num-seqs" not in (f.get("past-the-knee", {}).get("fix", {}).get("flags", {}).get("set") or {})


def test_a_sweep_as_baseline_flags_the_loads_that_regressed(tmp_path):
    """Before: knee at 32. After (a regression): knee at 8. Loads up to 8 are unchanged; from 16 on
    throughput falls and latency rises, so --fail-on-regression exits 1 and says where."""
    write_sweep(tmp_path / "before", [1, 2, 4, 8, 16, 32, 64], 32)
    write_sweep(tmp_path / "after", [1, 2, 4, 8, 16, 32, 64], 8)
    p = run_cli("--format", "json", tmp_path / "after", "--baseline", tmp_path / "before", "--fail-on-regression")
    assert p.returncode == 1, p.stderr.decode()
    c = report(p.stdout)["comparison"]
    assert c["sweep"]["knee_before"] == 32 and c["sweep"]["knee_after"] == 8
    s = c["signals"]
    assert s["sweep output tok/s at concurrency 8"]["verdict"] == "unchanged"
    assert s["sweep output tok/s at concurrency 16"]["verdict"] == "worse"
    assert s["sweep tpot p50 at concurrency 32"]["verdict"] == "worse"
    same = run_cli("--format", "json", tmp_path / "before", "--baseline", tmp_path / "before", "--fail-on-regression")
    assert same.returncode == 0, same.stderr.decode()


def test_genai_perf_csv_is_read_and_its_load_comes_from_the_folder_name(tmp_path):
    """GenAI-Perf's per-run CSV (quoted thousands, a statistics table then single values) says no
    load: alone it is read and said to be outside any sweep; in a `…-concurrency16` folder it is
    the point at 16."""
    real = BENCH / "genai-perf-nvidia-cloudai-doc-csv" / "profile_genai_perf.csv"
    d = analyze(real)
    assert d["inputs"][0]["kind"] == "bench:genai-perf" and "not placed in a sweep" in d["inputs"][0]["errors"][0]
    run = tmp_path / "artifacts" / "model-openai-chat-concurrency16"
    run.mkdir(parents=True)
    (run / real.name).write_bytes(real.read_bytes())
    p = _sweep(tmp_path / "artifacts")["sweep"]["points"][0]
    assert p["concurrency"] == 16 and p["ttft_mean_ms"] == pytest.approx(1146.3) and p["ttft_p99_ms"] == pytest.approx(3458.0)
    assert p["itl_p50_ms"] == pytest.approx(30.1) and p["output_tps"] == pytest.approx(261.2) and p["completed"] == 40


def _server_log(runs: list[dict], kv_of) -> str:
    """A vLLM log of the same runs: a stats line every 5 s of each run, KV usage as `kv_of(load)`."""
    from datetime import datetime, timedelta
    lines = ["INFO 11-25 11:59:00 [api_server.py:1] vLLM API server version 0.11.0\n",
             "INFO 11-25 11:59:01 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='example/generated-8b', "
             "max_num_seqs=256, tensor_parallel_size=1\n"]
    for r in runs:
        start = datetime.strptime(r["date"], "%Y%m%d-%H%M%S")
        c = r["max_concurrency"]
        for k in range(1, int(r["duration"] // 5) + 1):
            t = start + timedelta(seconds=5 * k)
            lines.append(f"INFO {t:%m-%d %H:%M:%S} [loggers.py:127] Engine 000: Avg prompt throughput: 100.0 tokens/s, "
                         f"Avg generation throughput: {r['output_throughput']:.1f} tokens/s, Running: {c} reqs, "
                         f"Waiting: 0 reqs, GPU KV cache usage: {kv_of(c):.1f}%, Prefix cache hit rate: 0.0%\n")
    return "".join(lines)


def test_with_the_runs_server_log_the_knee_is_explained_by_what_the_server_saw(tmp_path):
    """The sweep and the server log of the same runs, on one time axis: each point carries the
    server's running / KV usage during its run, and the knee's limit is read from them."""
    loads, knee = [2, 4, 8, 16, 32, 64], 16
    full = tmp_path / "kv"
    write_sweep(full, loads, knee)
    runs = sweep_runs(loads, knee)
    (full / "server.log").write_text(_server_log(runs, lambda c: min(99.0, 6.0 * c)))
    d = analyze(full, year=2026)
    by = {p["concurrency"]: p for p in d["sweep"]["points"]}
    assert by[2]["server_kv_usage_max"] == 12.0 and by[16]["server_kv_usage_max"] == 96.0
    assert d["sweep"]["limit"] == "kv-capacity"
    roomy = tmp_path / "compute"
    write_sweep(roomy, loads, knee)
    (roomy / "server.log").write_text(_server_log(runs, lambda c: 20.0))
    assert analyze(roomy, year=2026)["sweep"]["limit"] == "compute"

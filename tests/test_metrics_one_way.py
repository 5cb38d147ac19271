"""Issue 33: metrics give the same numbers whichever way they arrive — a saved OpenMetrics dump, a
`query_range` JSON export, a live Prometheus (`--prometheus`), and the last scrape as `/metrics`
text. The series are real-shaped (each engine's own names, labels and buckets: SGLang 0.5, vLLM V0,
the Triton TensorRT-LLM backend before and after v0.18, a Dynamo frontend), backfilled with promtool
into a real Prometheus started here; rates and gauges are steady, so every path must agree."""
from __future__ import annotations

import json
import math
import os
import re
import urllib.parse
import urllib.request
from datetime import timezone

import pytest

from conftest import ROOT, run_cli, report
from prom_harness import PromServer, backfill, default_start, missing_tools

MINUTES, STEP = 20, 15
TTFT_LE = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0)        # SGLang's and Dynamo's top TTFT bucket is short of a slow run
E2E_LE = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0)
ITER_LE = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)     # vLLM 0.6.4+


def _labels(d: dict) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in d.items()) + "}" if d else ""


class Dump:
    """OpenMetrics for promtool (families contiguous, seconds timestamps, `# EOF`), and the last
    scrape as Prometheus text."""

    def __init__(self, t0: int) -> None:
        self.t0 = t0
        self.times = [t0 + i * STEP for i in range(MINUTES * 60 // STEP + 1)]
        self.fams: dict[str, tuple[str, list]] = {}

    def put(self, fam: str, typ: str, name: str, labels: dict, values: list) -> None:
        self.fams.setdefault(fam, (typ, []))[1].append((name, labels, values))

    def gauge(self, name: str, labels: dict, value) -> None:
        self.put(name, "gauge", name, labels, [value] * len(self.times))

    def counter(self, name: str, labels: dict, start: float, per_s: float) -> None:
        self.put(name, "counter", name + "_total", labels, [start + per_s * (t - self.t0) for t in self.times])

    def histogram(self, fam: str, labels: dict, les: tuple, shares: tuple, per_s: float, mean: float) -> None:
        """`shares`: the share of requests in each bucket, +Inf's last (len(les) + 1)."""
        cum, acc = [], 0.0
        for s in shares:
            acc += s
            cum.append(acc)
        n = [10000 + per_s * (t - self.t0) for t in self.times]
        for le, c in zip([*map(str, les), "+Inf"], cum):
            self.put(fam, "histogram", fam + "_bucket", {**labels, "le": le}, [round(x * c) for x in n])
        self.put(fam, "histogram", fam + "_sum", labels, [round(x * mean, 3) for x in n])
        self.put(fam, "histogram", fam + "_count", labels, [round(x) for x in n])

    def openmetrics(self) -> str:
        out = []
        for fam, (typ, series) in self.fams.items():
            out.append(f"# TYPE {fam} {typ}")
            for name, labels, values in series:
                out += [f"{name}{_labels(labels)} {v} {t}" for t, v in zip(self.times, values)]
        return "\n".join(out) + "\n# EOF\n"

    def last_scrape(self, ns: str) -> str:
        out = []
        for fam, (typ, series) in self.fams.items():
            mine = [(n, lab, v) for n, lab, v in series if lab.get("namespace") == ns]
            if mine:
                out.append(f"# TYPE {fam} {typ}")
                out += [f"{n}{_labels({k: x for k, x in lab.items() if k != 'namespace'})} {v[-1]}" for n, lab, v in mine]
        return "\n".join(out) + "\n"


SGLANG_MODEL = "Qwen/Qwen2.5-7B-Instruct"
V0_MODEL = "meta-llama/Llama-2-13b-chat-hf"
V1_MODEL = "Qwen/Qwen3-32B"
LLAMA_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
DYNAMO_MODEL = "deepseek-ai/DeepSeek-R1-Distill-Llama-8B"


def _build(d: Dump) -> None:
    # SGLang 0.5: func_latency_seconds comes first and names a function in its `name` label; the
    # gen_throughput gauge says what the token counter's rate says (2100 tokens/s).
    lab = {"instance": "sglang-0:30000", "job": "sglang", "namespace": "sglang", "model_name": SGLANG_MODEL,
           "engine_type": "unified", "tp_rank": "0"}
    d.histogram("sglang:func_latency_seconds", {"instance": lab["instance"], "job": "sglang", "namespace": "sglang",
                                                "name": "generate_request"}, (0.05, 0.1, 0.5), (0.5, 0.3, 0.1, 0.1), 2, 0.1)
    d.gauge("sglang:num_running_reqs", lab, 40)
    d.gauge("sglang:num_queue_reqs", lab, 5)
    d.gauge("sglang:token_usage", lab, 0.5)
    d.gauge("sglang:gen_throughput", lab, 2100)
    d.counter("sglang:generation_tokens", lab, 9.1e6, 2100)
    d.counter("sglang:prompt_tokens", lab, 3.3e7, 8000)
    # 0.4.9+: prefix-cache hit tokens (a quarter of the prompt tokens), finished and aborted requests
    d.counter("sglang:cached_tokens", lab, 8e6, 2000)
    d.counter("sglang:num_requests", lab, 40000, 4)
    d.counter("sglang:num_aborted_requests", lab, 3000, 0.4)
    # 77 % of first tokens took longer than the top bucket (30 s)
    d.histogram("sglang:time_to_first_token_seconds", lab, TTFT_LE, (0.01, 0.02, 0.05, 0.05, 0.05, 0.05, 0.77), 4, 214.0)
    # vLLM V0 (0.6): the throughput gauges beside the counters, and a hit rate of -1 (no data)
    lab = {"instance": "vllm-v0:8000", "job": "vllm", "namespace": "vllm_v0", "model_name": V0_MODEL}
    d.gauge("vllm:num_requests_running", lab, 20)
    d.gauge("vllm:num_requests_waiting", lab, 0)
    d.gauge("vllm:num_requests_swapped", lab, 2)
    d.gauge("vllm:gpu_cache_usage_perc", lab, 0.3)
    d.gauge("vllm:gpu_prefix_cache_hit_rate", lab, -1)
    d.gauge("vllm:avg_generation_throughput_toks_per_s", lab, 512)
    d.gauge("vllm:avg_prompt_throughput_toks_per_s", lab, 1500)
    d.counter("vllm:generation_tokens", lab, 1e6, 512)
    d.counter("vllm:prompt_tokens", lab, 3e6, 1500)
    # speculative decoding (V0's acceptance gauge, a fraction); finished requests by reason
    d.gauge("vllm:spec_decode_draft_acceptance_rate", lab, 0.62)
    for reason, per_s in (("stop", 2.7), ("length", 0.3)):
        d.counter("vllm:request_success", {**lab, "finished_reason": reason}, 5000, per_s)
    # vLLM V1 (0.10+): spec-decode token counters (30 % of drafts accepted), prefix-cache tokens
    # (40 % hit), finished requests by reason (V1 exports every reason), tokens per engine step
    lab = {"instance": "vllm-v1:8000", "job": "vllm", "namespace": "vllm_v1", "model_name": V1_MODEL, "engine": "0"}
    d.gauge("vllm:num_requests_running", lab, 12)
    d.gauge("vllm:num_requests_waiting", lab, 0)
    d.gauge("vllm:kv_cache_usage_perc", lab, 0.45)
    d.counter("vllm:generation_tokens", lab, 2e6, 1000)
    d.counter("vllm:prompt_tokens", lab, 9e6, 9000)
    d.counter("vllm:prefix_cache_queries", lab, 9e6, 9000)
    d.counter("vllm:prefix_cache_hits", lab, 3.6e6, 3600)
    d.counter("vllm:spec_decode_num_draft_tokens", lab, 1e6, 1000)
    d.counter("vllm:spec_decode_num_accepted_tokens", lab, 3e5, 300)
    d.counter("vllm:spec_decode_num_drafts", lab, 3.3e5, 333)
    for reason, per_s in (("stop", 8.0), ("length", 1.5), ("abort", 0.5), ("error", 0.0)):
        d.counter("vllm:request_success", {**lab, "finished_reason": reason}, 1000, per_s)
    d.histogram("vllm:iteration_tokens_total", lab, ITER_LE, (0.3, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.0, 0.0, 0.0, 0.0, 0.0),
                25, 120.0)
    # Triton's TensorRT-LLM backend before v0.18: no `waiting`, no KV `fraction` (used / max)
    lab = {"instance": "triton-old:8002", "job": "triton", "namespace": "triton_old", "model": "tensorrt_llm", "version": "1"}
    for rt, x in (("active", 30), ("max", 64), ("scheduled", 30), ("context", 2)):
        d.gauge("nv_trt_llm_request_metrics", {**lab, "request_type": rt}, x)
    for bt, x in (("max", 6000), ("used", 3000), ("free", 3000), ("tokens_per", 64)):
        d.gauge("nv_trt_llm_kv_cache_block_metrics", {**lab, "kv_cache_block_type": bt}, x)
    # … and from v0.18
    lab = {"instance": "triton-new:8002", "job": "triton", "namespace": "triton_new", "model": "tensorrt_llm", "version": "1"}
    for rt, x in (("active", 64), ("max", 64), ("scheduled", 64), ("context", 3), ("waiting", 12)):
        d.gauge("nv_trt_llm_request_metrics", {**lab, "request_type": rt}, x)
    for bt, x in (("max", 6239), ("used", 5615), ("free", 624), ("tokens_per", 64), ("fraction", 0.9)):
        d.gauge("nv_trt_llm_kv_cache_block_metrics", {**lab, "kv_cache_block_type": bt}, x)
    # Dynamo's frontend: the model in `model`
    lab = {"instance": "dynamo-frontend:8000", "job": "dynamo", "namespace": "dynamo", "model": DYNAMO_MODEL}
    d.gauge("dynamo_frontend_inflight_requests", lab, 32)
    d.gauge("dynamo_frontend_queued_requests", lab, 0)
    d.counter("dynamo_frontend_output_tokens", lab, 5e6, 1900)
    d.histogram("dynamo_frontend_time_to_first_token_seconds", lab, TTFT_LE, (0.5, 0.3, 0.1, 0.05, 0.03, 0.02, 0.0), 3, 0.4)
    d.histogram("dynamo_frontend_request_duration_seconds", lab, E2E_LE, (0.1, 0.4, 0.3, 0.1, 0.05, 0.05, 0.0), 3, 9.0)


MIXED = {   # instance -> (engine, model, running, waiting, KV fraction, generated tokens/s)
    "sglang-a:30000": ("sglang", LLAMA_MODEL, 30, 2, 0.6, 1500),
    "vllm-b:8000": ("vllm", LLAMA_MODEL, 20, 0, 0.3, 800),
    "vllm-c:8000": ("vllm", V1_MODEL, 25, 0, 0.4, 900),
}


def _build_live_only(d: Dump) -> None:
    """Series only the live tests read: a fleet of SGLang and vLLM replicas in one namespace, and
    two servers with requests waiting while none run — in a burst, and held."""
    for inst, (eng, model, running, waiting, kv, gen) in MIXED.items():
        lab = {"instance": inst, "job": eng, "namespace": "mixed", "model_name": model}
        if eng == "sglang":
            lab["engine_type"] = "unified"
            d.gauge("sglang:num_running_reqs", lab, running)
            d.gauge("sglang:num_queue_reqs", lab, waiting)
            d.gauge("sglang:token_usage", lab, kv)
            d.counter("sglang:generation_tokens", lab, 1e6, gen)
        else:
            d.gauge("vllm:num_requests_running", {**lab, "engine": "0"}, running)
            d.gauge("vllm:num_requests_waiting", {**lab, "engine": "0"}, waiting)
            d.gauge("vllm:kv_cache_usage_perc", {**lab, "engine": "0"}, kv)
            d.counter("vllm:generation_tokens", {**lab, "engine": "0"}, 1e6, gen)
    # Short requests: tokens flow, nothing is running at the scrape instants, and now and then a
    # burst of 10 arrivals is caught waiting (one sample in seven) — or requests wait in most
    # samples while none runs (a server that admits no work).
    n = len(d.times)
    for ns, waiting, gen in (("waiting_burst", [10 if i % 7 == 3 else 0 for i in range(n)], 300),
                             ("waiting_held", [0 if i % 5 == 0 else 6 for i in range(n)], 0)):
        lab = {"instance": f"{ns}:8000", "job": "vllm", "namespace": ns, "model_name": LLAMA_MODEL, "engine": "0"}
        d.gauge("vllm:num_requests_running", lab, 0)
        d.put("vllm:num_requests_waiting", "gauge", "vllm:num_requests_waiting", lab, waiting)
        d.gauge("vllm:kv_cache_usage_perc", lab, 0.02)
        d.counter("vllm:generation_tokens", lab, 1e6, gen)


NAMESPACES = ("sglang", "vllm_v0", "vllm_v1", "triton_old", "triton_new", "dynamo")


class Data:
    def __init__(self, server: PromServer, dump: Dump, base) -> None:
        self.server, self.dump, self.base = server, dump, base


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    if missing_tools():
        pytest.fail("prometheus and promtool are needed (apt-get install prometheus)", pytrace=False)
    base = tmp_path_factory.mktemp("one-way")
    t0 = int(default_start(MINUTES).timestamp()) // STEP * STEP
    dump = Dump(t0)
    _build(dump)
    _build_live_only(dump)
    om = base / "all.om"
    om.write_text(dump.openmetrics())
    backfill(om, base / "tsdb")
    with PromServer(base / "tsdb", workdir=base / "server") as server:
        yield Data(server, dump, base)


def _window(d: Dump) -> list[str]:
    """The live window starts two minutes into the data: its first rates then have a full rate
    window of samples behind them, as a server that ran before the window has."""
    from datetime import datetime
    s, e = (datetime.fromtimestamp(x, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") for x in (d.t0 + 120, d.times[-1]))
    return ["--start", s, "--end", e]


def _json(*args) -> dict:
    p = run_cli(*args, "--format", "json")
    assert p.returncode == 0 and b"Traceback" not in p.stderr, p.stderr.decode(errors="replace")[-2000:]
    d = report(p.stdout)
    return d["analyses"][0] if len(d["analyses"]) == 1 else d


def _dump_file(data: Data, ns: str):
    """The namespace's own series as a saved OpenMetrics dump."""
    text = data.dump.openmetrics()
    keep = [ln for ln in text.splitlines() if ln.startswith("#") or f'namespace="{ns}"' in ln]
    lines = [ln for i, ln in enumerate(keep) if not ln.startswith("# TYPE") or
             (i + 1 < len(keep) and not keep[i + 1].startswith("#"))]
    p = data.base / f"{ns}.om"
    p.write_text("\n".join(lines) + "\n")
    return p


def _query_range_file(data: Data, ns: str):
    """What a user exports from Prometheus: every series of the namespace, raw, as query_range JSON."""
    d = data.dump
    q = urllib.parse.urlencode({"query": f'{{namespace="{ns}"}}', "start": d.t0, "end": d.times[-1], "step": STEP})
    with urllib.request.urlopen(f"{data.server.url}/api/v1/query_range?{q}", timeout=30) as r:
        body = r.read()
    assert json.loads(body)["data"]["result"]
    p = data.base / f"{ns}.query_range.json"
    p.write_bytes(body)
    return p


def _signals(a: dict) -> dict:
    """What a user compares: the deployment's engine and model, each stats signal's mean (or its
    absence), and the window's TTFT figures with their bounds."""
    ks = a.get("signals") or {}
    out = {"engine": a["deployment"].get("engine"), "model": a["deployment"].get("model"),
           "verdict": (a.get("verdict") or {}).get("bottleneck")}
    for name in ("generation_throughput", "prompt_throughput", "running", "waiting", "kv_cache_usage", "prefix_cache_hit"):
        out[name] = round(ks[name]["mean"], 1) if name in ks else None
    for k in ("ttft_p50_window", "ttft_p99_window", "ttft_mean_window", "e2e_mean_window"):
        e = ks.get(k)
        out[k] = (round(e["value"], 2), bool(e.get("above_top_bucket")), bool(e.get("at_most"))) if e else None
    out["swapped"] = round(ks["swapped"]["mean"], 1) if "swapped" in ks else None
    # the expert families: shares and ratios over the window (counts depend on its length)
    for k in ("finished_stop_pct_window", "finished_length_pct_window", "finished_abort_pct_window", "aborted_pct_window",
              "spec_acceptance_window", "iteration_tokens_mean_window", "iteration_tokens_p50_window",
              "prefix_cache_hit_window"):
        out[k] = round(ks[k]["value"], 1) if k in ks else None
    out["speculative"] = a["deployment"].get("speculative")
    return out


EXPERT_NONE = {"finished_stop_pct_window": None, "finished_abort_pct_window": None, "aborted_pct_window": None,
               "spec_acceptance_window": None, "iteration_tokens_mean_window": None, "swapped": None, "speculative": None}
EXPECTED = {
    "sglang": {"engine": "sglang", "model": SGLANG_MODEL, "generation_throughput": 2100.0, "prompt_throughput": 8000.0,
               "running": 40.0, "waiting": 5.0, "kv_cache_usage": 50.0, "prefix_cache_hit": 25.0,
               "prefix_cache_hit_window": 25.0, "ttft_p50_window": (30.0, True, False), "ttft_mean_window": (214.0, False, False),
               **EXPERT_NONE, "aborted_pct_window": 10.0},
    "vllm_v0": {"engine": "vllm", "model": V0_MODEL, "generation_throughput": 512.0, "prompt_throughput": 1500.0,
                "running": 20.0, "waiting": 0.0, "kv_cache_usage": 30.0, "prefix_cache_hit": None,
                **EXPERT_NONE, "swapped": 2.0, "spec_acceptance_window": 62.0, "speculative": True,
                # finished by reason, no request aborted (V0 makes a reason's series at its first request)
                "finished_stop_pct_window": 90.0, "finished_length_pct_window": 10.0, "finished_abort_pct_window": 0.0,
                "aborted_pct_window": 0.0},
    "vllm_v1": {"engine": "vllm", "model": V1_MODEL, "generation_throughput": 1000.0, "prompt_throughput": 9000.0,
                "running": 12.0, "waiting": 0.0, "kv_cache_usage": 45.0, "prefix_cache_hit": 40.0,
                "prefix_cache_hit_window": 40.0, **EXPERT_NONE, "spec_acceptance_window": 30.0, "speculative": True,
                "finished_stop_pct_window": 80.0, "finished_length_pct_window": 15.0, "finished_abort_pct_window": 5.0,
                "aborted_pct_window": 5.0, "iteration_tokens_mean_window": 120.0, "iteration_tokens_p50_window": 8.0},
    "triton_old": {"engine": "trtllm", "running": 30.0, "waiting": None, "kv_cache_usage": 50.0,
                   "generation_throughput": None, **EXPERT_NONE},
    "triton_new": {"engine": "trtllm", "running": 64.0, "waiting": 12.0, "kv_cache_usage": 90.0, **EXPERT_NONE},
    "dynamo": {"model": DYNAMO_MODEL, "generation_throughput": 1900.0, "running": 32.0, "waiting": 0.0,
               "ttft_p50_window": (0.1, False, True), "e2e_mean_window": (9.0, False, False), **EXPERT_NONE},
}
# Rules the expert families feed, found whichever way the series arrive
FINDS = {"vllm_v1": {"spec-decode-low-acceptance"}}
QUIET = {"vllm_v0": {"spec-decode-low-acceptance"}, "sglang": {"spec-decode-low-acceptance"}}


def _close(got, want) -> bool:
    if isinstance(want, float):
        return got is not None and math.isclose(got, want, rel_tol=0.02, abs_tol=0.05)
    if isinstance(want, tuple):
        return got is not None and _close(got[0], want[0]) and tuple(got[1:]) == want[1:]
    return got == want


@pytest.mark.parametrize("ns", NAMESPACES)
def test_every_path_gives_the_same_signals(data, ns):
    """A saved dump, a query_range export and a live Prometheus: the same engine, model, rates,
    gauges (absent where the engine exports none: not 0) and window latencies."""
    docs = {"live": _json("--prometheus", data.server.url, "--match", f'{{namespace="{ns}"}}', *_window(data.dump)),
            "dump": _json(_dump_file(data, ns)), "query_range": _json(_query_range_file(data, ns))}
    for how, a in docs.items():
        ids = {f["id"] for f in a.get("findings", [])}
        assert FINDS.get(ns, set()) <= ids and not QUIET.get(ns, set()) & ids, f"{ns} via {how}: {sorted(ids)}"
    live, dump, qr = (_signals(docs[k]) for k in ("live", "dump", "query_range"))
    for k, want in EXPECTED[ns].items():
        for how, got in (("live", live), ("dump", dump), ("query_range", qr)):
            assert _close(got[k], want), f"{ns} {k} via {how}: {got[k]} (want {want})\nlive {live}\ndump {dump}\nquery_range {qr}"
    assert live == dump == qr or all(_close(dump[k], live[k] if not isinstance(live[k], (int, float)) or live[k] is None
                                             else float(live[k])) for k in live if k != "verdict"), (live, dump, qr)
    assert live["verdict"] == dump["verdict"] == qr["verdict"], (live, dump, qr)


def test_a_single_scrape_summarises_the_servers_lifetime(data, tmp_path):
    """One `/metrics` scrape: its counters and histograms are the server's life so far — the TTFT
    mean and the requests are said, labelled "since the server started", and a quantile in the +Inf
    bucket is "> top bucket"; vLLM V0's throughput gauge is read, its -1 hit rate is unknown."""
    f = tmp_path / "sglang.prom"
    f.write_text(data.dump.last_scrape("sglang"))
    p = run_cli(f)
    out = p.stdout.decode()
    assert "since the server started" in out and "TTFT mean 214 s" in out, out
    assert "> top bucket 30" in out, out
    a = _json(f)
    assert a["signals"]["ttft_mean_lifetime"]["value"] == 214.0 and a["deployment"]["model"] == SGLANG_MODEL
    v0 = tmp_path / "v0.prom"
    v0.write_text(data.dump.last_scrape("vllm_v0"))
    out = run_cli(v0).stdout.decode()
    assert "-100 %" not in out and "prefix-cache hit" not in out, out      # (the temporary path may hold "-100")
    a = _json(v0)
    assert "prefix_cache_hit" not in a["signals"], a["signals"]


def test_unknown_is_never_drawn_as_zero(data, tmp_path):
    """Triton before v0.18 exports no waiting count and no generation counter: the timeline draws
    neither (no "max 0"), the JSON has no such signal."""
    out = run_cli(_dump_file(data, "triton_old")).stdout.decode()
    timeline = out.split("Timeline", 1)[1].split("\n\n")[0] if "Timeline" in out else ""
    assert "KV usage" in timeline and "waiting" not in timeline and "gen tokens/s" not in timeline, out


def test_moving_histograms_are_not_idle(tmp_path):
    """Two scrapes of a Dynamo frontend a minute apart, taken when nothing was in flight: 170,450
    requests finished between them (its histograms moved). That is not idle."""
    fam = "dynamo_frontend_request_duration_seconds"
    lab = f'model="{DYNAMO_MODEL}"'
    text = []
    for ts, n in ((1_760_000_000_000, 1_000_000), (1_760_000_060_000, 1_170_450)):
        text += [f"dynamo_frontend_inflight_requests{{{lab}}} 0 {ts}", f"dynamo_frontend_queued_requests{{{lab}}} 0 {ts}"]
        text += [f'{fam}_bucket{{{lab},le="{le}"}} {round(n * s)} {ts}' for le, s in (("1.0", 0.4), ("5.0", 0.9), ("+Inf", 1.0))]
        text += [f"{fam}_sum{{{lab}}} {n * 2.5} {ts}", f"{fam}_count{{{lab}}} {n} {ts}"]
        text += [f'dynamo_frontend_time_to_first_token_seconds_bucket{{{lab},le="{le}"}} {round(n * s)} {ts}'
                 for le, s in (("0.1", 0.5), ("1.0", 0.95), ("+Inf", 1.0))]
        text += [f"dynamo_frontend_time_to_first_token_seconds_count{{{lab}}} {n} {ts}"]
    f = tmp_path / "dynamo.prom"
    f.write_text("\n".join(text) + "\n")
    a = _json(f)
    assert a["verdict"]["bottleneck"] != "idle", a["verdict"]
    assert a["deployment"]["model"] == DYNAMO_MODEL
    assert any("170,450" in s or "170450" in s for s in a["verdict"]["signals"]), a["verdict"]


# -- a bare /metrics endpoint, sampled ------------------------------------------------------------------
class Exporter:
    """A real HTTP server serving vLLM V1 /metrics text that moves with the clock: 1200 generated
    tokens/s, 30 running, 2 waiting, KV 40 %, TTFT histogram growing 5 requests/s."""

    def __init__(self) -> None:
        import threading
        import time
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        t0 = time.time()

        class H(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                dt = time.time() - t0
                lab = 'engine="0",model_name="Qwen/Qwen3-8B"'
                n = 1000 + 5 * dt
                body = "\n".join([
                    "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{lab}}} 30.0",
                    "# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting{{{lab}}} 2.0",
                    "# TYPE vllm:kv_cache_usage_perc gauge", f"vllm:kv_cache_usage_perc{{{lab}}} 0.4",
                    "# TYPE vllm:generation_tokens_total counter", f"vllm:generation_tokens_total{{{lab}}} {5e5 + 1200 * dt}",
                    "# TYPE vllm:time_to_first_token_seconds histogram",
                    *(f'vllm:time_to_first_token_seconds_bucket{{{lab},le="{le}"}} {n * s}'
                      for le, s in (("0.1", 0.2), ("0.5", 0.8), ("1.0", 0.95), ("+Inf", 1.0))),
                    f"vllm:time_to_first_token_seconds_sum{{{lab}}} {n * 0.35}",
                    f"vllm:time_to_first_token_seconds_count{{{lab}}} {n}",
                    "# HELP python_gc_objects_collected_total Objects collected during gc",
                    'python_gc_objects_collected_total{generation="0"} 1234.0', ""]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/metrics"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def exporter():
    e = Exporter()
    yield e
    e.close()


def test_a_bare_metrics_endpoint_is_sampled_into_rates(exporter, tmp_path):
    """`--scrape URL --for 5s --interval 0.5s --save FILE`: the rates of the samples (1200 tokens/s),
    the gauges, the window's TTFT; the saved file read again gives the same signals; a /metrics
    URL given to --prometheus is sampled the same way."""
    saved = tmp_path / "samples.prom"
    a = _json("--scrape", exporter.url, "--for", "5s", "--interval", "0.5s", "--save", saved)
    s = a["signals"]
    assert abs(s["generation_throughput"]["mean"] - 1200) <= 30, s["generation_throughput"]
    assert s["running"]["mean"] == 30 and s["waiting"]["mean"] == 2 and s["kv_cache_usage"]["mean"] == 40, s
    assert a["deployment"]["model"] == "Qwen/Qwen3-8B" and a["deployment"]["engine"] == "vllm"
    assert 0.1 < s["ttft_p50_window"]["value"] <= 0.5, s.get("ttft_p50_window")
    again = _json(saved)
    assert _signals(again) == _signals(a)
    b = _json("--prometheus", exporter.url, "--for", "3s", "--interval", "0.5s")
    assert abs(b["signals"]["generation_throughput"]["mean"] - 1200) <= 30, b["signals"]


def test_a_bare_endpoint_that_is_not_there_is_one_line(exporter):
    p = run_cli("--scrape", exporter.url.replace("/metrics", "/nothing"), "--for", "2s", "--interval", "1s")
    err = p.stderr.decode().strip().splitlines()
    assert p.returncode == 2 and "HTTP 404" in err[-1] and "Traceback" not in p.stderr.decode(), err


@pytest.mark.parametrize("match, says", [('{job=}', 'unexpected "}"'), ('{namespace=~"("}', "missing closing )"),
                                         ('{namespace="sglang"', "unexpected left brace '{'")])
def test_a_match_prometheus_cannot_parse_is_one_readable_line(data, match, says):
    """A bad --match: exit 2 and one line that names the --match and says Prometheus' problem in
    words (not the answer's bytes repr, nor a position in a query the user never wrote)."""
    p = run_cli("--prometheus", data.server.url, "--match", match, *_window(data.dump))
    err = p.stderr.decode()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"diagnose: --match {match}: ") and says in lines[0], lines[0]
    assert "b'" not in lines[0] and "\\'" not in lines[0] and not re.search(r"\b1:\d+:", lines[0]), lines[0]


STEADY = re.compile(r"steady window (\d\d-\d\d \d\d:\d\d:\d\d)–(\d\d:\d\d:\d\d) (\S+) \(")


@pytest.mark.parametrize("tz", ["Europe/Berlin", "America/New_York"])
def test_times_of_metrics_are_shown_in_the_local_zone_or_utc_and_say_which(data, monkeypatch, tz):
    """Sample times are Unix times: the report shows them in the machine's zone and names it
    (CET, EST…); `--utc` shows the same instants in UTC, named so. The dump and a live
    Prometheus alike."""
    from datetime import datetime
    from zoneinfo import ZoneInfo
    monkeypatch.setenv("TZ", tz)
    year = datetime.fromtimestamp(data.dump.t0, timezone.utc).year
    for how in (["--prometheus", data.server.url, "--match", '{namespace="vllm_v1"}', *_window(data.dump)],
                [_dump_file(data, "vllm_v1")]):
        local, utc = (STEADY.search(run_cli(*how, *extra).stdout.decode()) for extra in ([], ["--utc"]))
        assert local and utc, how
        assert utc.group(3) == "UTC"
        start_utc = datetime.strptime(f"{year}-{utc.group(1)}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
        start_local = start_utc.astimezone(ZoneInfo(tz))
        assert local.group(1) == start_local.strftime("%m-%d %H:%M:%S"), (local.group(0), utc.group(0))
        assert local.group(3) == start_local.tzname() != "UTC", local.group(0)


def test_watch_on_a_bare_endpoint_samples_it_and_refreshes_the_diagnosis(exporter, tmp_path):
    """`--scrape URL --watch 0.3s`: one scrape added before each pass, the diagnosis refreshed over
    the samples so far (JSON Lines off a terminal): later passes hold more samples, the rate is
    the endpoint's 1200 tokens/s, Ctrl-C gives the final report and exit 0; --save keeps them."""
    import signal
    import subprocess
    import sys
    import time
    saved = tmp_path / "watched.prom"
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    p = subprocess.Popen([sys.executable, "-m", "diagnose", "--scrape", exporter.url, "--watch", "0.3s",
                          "--save", str(saved), "--format", "json"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        lines = []
        while time.monotonic() < deadline and len([x for x in lines if "verdict" in x or "analyses" in x]) < 3:
            line = p.stdout.readline()
            if not line:
                break
            lines.append(json.loads(line))
        p.send_signal(signal.SIGINT)
        rest, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    lines += [json.loads(x) for x in rest.decode().splitlines() if x.strip()]
    assert p.returncode == 0 and b"Traceback" not in err, err.decode()[-2000:]
    passes = [d["analyses"][0] if "analyses" in d else d for d in lines if "verdict" in d or "analyses" in d]
    assert len(passes) >= 3 and lines[-1].get("final") is True, lines
    counts = [(a["signals"].get("running") or {}).get("n", 0) for a in passes]
    assert counts[-1] > counts[0] and counts == sorted(counts), counts
    assert abs(passes[-1]["signals"]["generation_throughput"]["mean"] - 1200) <= 30, passes[-1]["signals"]
    assert passes[-1]["deployment"]["engine"] == "vllm" and passes[-1]["deployment"]["model"] == "Qwen/Qwen3-8B"
    again = _json(saved)         # the kept samples read back: the same figures as the last pass
    assert abs(again["signals"]["generation_throughput"]["mean"] - 1200) <= 30


def test_watch_on_a_bare_endpoint_that_is_not_there_is_one_line(exporter):
    p = run_cli("--scrape", exporter.url.replace("/metrics", "/nothing"), "--watch", "1s")
    err = p.stderr.decode().strip().splitlines()
    assert p.returncode == 2 and "HTTP 404" in err[-1] and "Traceback" not in p.stderr.decode(), err


# -- live: a fleet of engines, and queues without work ---------------------------------------------
def _live(data: Data, ns: str) -> dict:
    p = run_cli("--prometheus", data.server.url, "--match", f'{{namespace="{ns}"}}', *_window(data.dump), "--format", "json")
    assert p.returncode == 0 and b"Traceback" not in p.stderr, p.stderr.decode(errors="replace")[-2000:]
    return json.loads(p.stdout)


def test_a_mixed_fleet_gives_each_replica_its_own_engine_model_and_figures(data):
    """SGLang and vLLM replicas in one Prometheus, under one --match: each instance is diagnosed
    with its own engine (from its own series), its own model and its own rates and gauges —
    never the first engine's, never another replica's figures."""
    doc = _live(data, "mixed")
    per = {}

    def walk(node):
        if isinstance(node, dict):
            if node.get("instance") in MIXED and "signals" in node:
                per[node["instance"]] = node
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(doc)
    assert set(per) == set(MIXED), sorted(per)
    for inst, (eng, model, running, waiting, kv, gen) in MIXED.items():
        a = per[inst]
        got = (a["deployment"].get("engine"), a["deployment"].get("model"), a["signals"]["running"]["mean"],
               a["signals"]["waiting"]["mean"], a["signals"]["kv_cache_usage"]["mean"],
               round(a["signals"]["generation_throughput"]["mean"]))
        assert got == (eng, model, running, waiting, kv * 100, gen), (inst, got)


@pytest.mark.parametrize("ns, saturated", [("waiting_burst", False), ("waiting_held", True)])
def test_waiting_with_nothing_running_is_queue_saturated_only_when_it_lasts(data, ns, saturated):
    """Nothing running at the scrape instants and requests waiting: a burst caught now and then
    (one sample in seven) is not a saturated queue; waiting in most samples while none runs is
    (the server admits no work) — whichever way the series arrive."""
    for how, a in (("live", _live(data, ns)), ("dump", _json(_dump_file(data, ns))),
                   ("query_range", _json(_query_range_file(data, ns)))):
        a = a["analyses"][0] if "analyses" in a else a
        verdict = a["verdict"]
        assert (verdict["bottleneck"] == "queue-saturated") is saturated, (ns, how, verdict)
        if saturated:
            assert any("none ran" in s for s in verdict["signals"]), (how, verdict)


def test_expert_figures_are_drawn_only_where_the_input_has_them(data):
    """The HTML plots draw the draft acceptance and the swapped requests where the input exports
    them (vLLM V0), and have no such panel or line where it does not (SGLang): unknown, not 0."""
    v0 = run_cli("--format", "html", _dump_file(data, "vllm_v0")).stdout.decode()
    sg = run_cli("--format", "html", _dump_file(data, "sglang")).stdout.decode()
    assert "Speculative decoding" in v0 and '"swapped"' in v0, v0[:2000]
    assert "Speculative decoding" not in sg and '"swapped"' not in sg


def test_plots_of_metrics_are_drawn_in_the_zone_the_text_names(data, monkeypatch):
    """The HTML plots' time axis of a metrics input follows the text: the machine's zone (Berlin,
    an hour ahead of UTC in winter, two in summer), or UTC with --utc."""
    from datetime import datetime
    from zoneinfo import ZoneInfo
    monkeypatch.setenv("TZ", "Europe/Berlin")
    f = _dump_file(data, "vllm_v1")
    first = [float(re.search(r'"x":\s*\[([\d.]+)', run_cli("-f", "html", f, *extra).stdout.decode()).group(1))
             for extra in ([], ["--utc"])]
    offset = datetime.fromtimestamp(first[1], ZoneInfo("Europe/Berlin")).utcoffset().total_seconds()
    assert first[0] - first[1] == offset and offset in (3600, 7200), first

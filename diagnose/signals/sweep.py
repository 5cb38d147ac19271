"""A load sweep (benchmark runs at several concurrencies or request rates) as signals: the curve,
its knee, the concurrency to run at, and why the knee is where it is.

The knee, as the output states it: the smallest load after which doubling it adds less than
KNEE_GAIN of output throughput while p99 TTFT or median TPOT rises by more than KNEE_RISE (the
nearest stand-ins when a tool reports neither: median or mean TTFT, ITL for TPOT). Runs at the same
load are averaged; runs of another workload or model form another sweep, and the one with the
most load levels is the one judged. Runs after targets are applied (pipeline): the recommended
load is the highest that meets them.
"""
from __future__ import annotations

from .producers import produces

import math

KNEE_GAIN = 0.10
KNEE_RISE = 0.50
DOUBLE = 1.9            # "doubling": the next load at least this many times the first (96 → 192, 20 → 40)
RULE = ("knee: the smallest load after which doubling it adds < 10 % output throughput while p99 TTFT "
        "or median TPOT rises > 50 %")
METRICS = ("output_tps", "request_tps", "ttft_mean_ms", "ttft_p50_ms", "ttft_p99_ms", "tpot_mean_ms", "tpot_p50_ms",
           "tpot_p99_ms", "itl_mean_ms", "itl_p50_ms", "itl_p99_ms", "e2e_p50_ms", "input_len_mean", "output_len_mean")


def _one_per_run(points: list[dict]) -> list[dict]:
    """A run reported twice (the result block a job printed and the JSON it saved): one point,
    with what either says. Same requests completed, same duration, same throughput, and no load that
    differs (saturated runs at two loads can agree on the rest): same run."""
    seen: dict = {}
    out = []
    for p in points:
        d, t = p.get("duration_s"), p.get("output_tps")
        k = (p.get("completed"), round(d, 2), round(t, 1)) if d is not None and t is not None else None
        first = seen.get(k) if k is not None else None
        if first is not None and not any(first.get(f) is not None and p.get(f) is not None and first[f] != p[f]
                                         for f in ("concurrency", "request_rate")):
            for f, v in p.items():
                if first.get(f) is None and v is not None:
                    first[f] = v
            continue
        p = dict(p)
        if k is not None:
            seen[k] = p
        out.append(p)
    return out


def _group(points: list[dict]) -> tuple[str, list[dict], int]:
    """(axis, the main sweep's points merged per load level, runs left out as another sweep)."""
    points = _one_per_run(points)

    def key(p):
        return (p.get("tool"), p.get("model"), p.get("workload"))
    groups: dict = {}
    for p in points:
        groups.setdefault(key(p), []).append(p)

    def levels(ps):
        conc = {p["concurrency"] for p in ps if p.get("concurrency") is not None}
        rate = {p["request_rate"] for p in ps if p.get("request_rate") is not None}
        return ("concurrency", conc) if len(conc) >= len(rate) and conc else ("request_rate", rate)
    best = max(groups.values(), key=lambda ps: len(levels(ps)[1]))
    axis, _ = levels(best)
    at: dict = {}
    for p in best:
        if p.get(axis) is not None:
            at.setdefault(p[axis], []).append(p)
    merged = []
    for load in sorted(at):
        runs = at[load]
        m = {"load": load, "runs": len(runs), "source": runs[0]["source"], "line": runs[0]["line"],
             "windows": [(r["started"], r["duration_s"]) for r in runs if r.get("started") and r.get("duration_s")],
             "burst": any(r.get("burst") for r in runs), "max_num_seqs": runs[0].get("max_num_seqs")}
        for k in METRICS:
            xs = [r[k] for r in runs if r.get(k) is not None]
            m[k] = sum(xs) / len(xs) if xs else None
        for k in ("completed", "failed"):
            xs = [r[k] for r in runs if r.get(k) is not None]
            m[k] = max(xs) if xs else None      # `vllm bench sweep` repeats runs in summary.json: not a sum
        merged.append(m)
    return axis, merged, len(points) - len(best)


def _ttft(p):
    for k, name in (("ttft_p99_ms", "p99 TTFT"), ("ttft_p50_ms", "median TTFT"), ("ttft_mean_ms", "mean TTFT")):
        if p.get(k) is not None:
            return k, name
    return None, None


def _tpot(p):
    for k, name in (("tpot_p50_ms", "median TPOT"), ("itl_p50_ms", "median ITL"), ("tpot_mean_ms", "mean TPOT"),
                    ("itl_mean_ms", "mean ITL")):
        if p.get(k) is not None:
            return k, name
    return None, None


def _step(a: dict, b: dict) -> dict | None:
    """Throughput gain and latency rise from load a to load b (None when throughput is unknown)."""
    if not a.get("output_tps") or b.get("output_tps") is None:
        return None
    out = {"gain": b["output_tps"] / a["output_tps"] - 1, "rise": None, "metric": None}
    for pick in (_ttft, _tpot):
        k, name = pick(a)
        if k and b.get(k) is not None and a[k] > 0:
            r = b[k] / a[k] - 1
            if out["rise"] is None or r > out["rise"]:
                out["rise"], out["metric"] = r, name
    return out


def _double_of(pts: list[dict], i: int) -> int | None:
    return next((j for j in range(i + 1, len(pts)) if pts[j]["load"] >= DOUBLE * pts[i]["load"]), None)


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


@produces("sweep_beyond_knee_n", "sweep_cap_suggested", "sweep_failed_points", "sweep_failed_share",
          "sweep_failed_total", "sweep_first", "sweep_first_failed_n", "sweep_knee", "sweep_knee_gain_pct",
          "sweep_knee_next", "sweep_knee_output_tps", "sweep_knee_rise_pct", "sweep_last", "sweep_last_from",
          "sweep_last_gain_pct", "sweep_last_rise_pct", "sweep_meeting_n", "sweep_observed_vs_knee",
          "sweep_points_n", "sweep_recommended", "sweep_requests_total", "sweep_targets_unchecked",
          "sweep_top_gain_pct", "sweep_top_rise_x", "sweep_tpot_factor", "sweep_ttft_factor",
          flags=("sweep_burst", "sweep_failed_from_first", "sweep_first_failed_all", "sweep_lightest_is_one",
          "sweep_targets_checked", "sweep_unsaturated"), texts=("engine", "sweep_axis", "sweep_extend_to",
          "sweep_failure_cause", "sweep_first_failed_at", "sweep_knee_at", "sweep_knee_metric",
          "sweep_knee_next_at", "sweep_last_at", "sweep_last_from_at", "sweep_lightest", "sweep_limit",
          "sweep_limit_why", "sweep_recommended_basis", "sweep_run_at", "sweep_slo_misses", "sweep_tool"))
def sweep_signals(ev, sig) -> None:
    """Adds the sweep's signals to `sig.values` and its table to `sig.sweep` (reports)."""
    if not ev.bench_points:
        return
    v = sig.values
    axis, pts, other = _group(ev.bench_points)
    if not pts:
        return
    v["sweep_points_n"] = len(pts)
    v["sweep_axis"] = "concurrency" if axis == "concurrency" else "request rate"
    v["sweep_tool"] = ev.bench_points[0].get("tool")
    if v.get("engine") is None:     # the flags to name: the engine the benchmark says it drove
        v["engine"] = next((p["backend"] for p in ev.bench_points if p.get("backend")), None)
    v["sweep_first"], v["sweep_last"] = pts[0]["load"], pts[-1]["load"]
    v["sweep_last_at"] = at(axis, pts[-1]["load"])
    v["sweep_burst"] = any(p["burst"] for p in pts) or None
    unit = "" if axis == "concurrency" else " req/s"
    _failures(v, pts, unit)
    knee = None
    for i in range(len(pts)):
        j = _double_of(pts, i)
        st = _step(pts[i], pts[j]) if j is not None else None
        if st and st["rise"] is not None and st["gain"] < KNEE_GAIN and st["rise"] > KNEE_RISE:
            knee = i
            v["sweep_knee"] = pts[i]["load"]
            v["sweep_knee_next"] = pts[j]["load"]
            v["sweep_knee_gain_pct"] = round(100 * st["gain"], 1)
            v["sweep_knee_rise_pct"] = round(100 * st["rise"])
            v["sweep_knee_metric"] = st["metric"]
            v["sweep_knee_output_tps"] = round(pts[i]["output_tps"], 1)
            v["sweep_knee_at"], v["sweep_knee_next_at"] = at(axis, pts[i]["load"]), at(axis, pts[j]["load"])
            break
    if len(pts) >= 2:
        last = len(pts) - 1
        half = max((i for i in range(last) if pts[i]["load"] * DOUBLE <= pts[-1]["load"]), default=last - 1)
        st = _step(pts[half], pts[-1])
        if st:
            v["sweep_last_gain_pct"] = round(100 * st["gain"], 1)
            v["sweep_last_rise_pct"] = round(100 * st["rise"]) if st["rise"] is not None else None
            v["sweep_last_from"] = pts[half]["load"]
            v["sweep_last_from_at"] = at(axis, pts[half]["load"])
            v["sweep_unsaturated"] = (knee is None and st["gain"] >= KNEE_GAIN
                                      and (st["rise"] is None or st["rise"] <= KNEE_RISE))
            if v["sweep_unsaturated"]:
                top = pts[-1]["load"]
                v["sweep_extend_to"] = f"{_fmt(2 * top)}{unit} and {_fmt(4 * top)}{unit}"
    _fuse(ev, pts)
    if knee is not None:
        _limit(ev, v, pts[knee], pts[j_of_knee] if (j_of_knee := _double_of(pts, knee)) is not None else None)
        _past_knee(v, pts, knee, unit)
    _targets(v, pts, unit)
    _run_at(v, unit)
    rec = v.get("sweep_recommended")
    sig.sweep = {"axis": axis, "unit": unit.strip(), "rule": RULE, "points": pts, "knee": v.get("sweep_knee"),
                 "recommended": rec, "recommended_basis": v.get("sweep_recommended_basis"),
                 "limit": v.get("sweep_limit"), "other_runs": other, "tool": v["sweep_tool"],
                 "burst": any(p["burst"] for p in pts)}
    span = (f"{len(pts)} load levels, {at(axis, pts[0]['load'])} to {_fmt(pts[-1]['load'])}{unit}" if len(pts) > 1
            else f"one run, {at(axis, pts[0]['load'])}")
    sig.provenance["sweep"] = {"metric": "load sweep", "window": span,
                               "value": f"knee at {_fmt(v['sweep_knee'])}{unit}" if knee is not None else "no knee by the rule"}


def _failures(v: dict, pts: list[dict], unit: str) -> None:
    failed = [p for p in pts if (p.get("failed") or 0) > 0 or (p.get("completed") == 0)]
    # A tool that does not count failures (older vllm bench, SGLang JSONL, AIPerf's sweep table)
    # leaves them unknown, not zero.
    if not any(p.get("failed") is not None for p in pts) and not failed:
        return
    total_failed = sum(p.get("failed") or 0 for p in pts)
    total = sum((p.get("failed") or 0) + (p.get("completed") or 0) for p in pts)
    v["sweep_failed_total"] = int(total_failed)
    v["sweep_requests_total"] = int(total)
    v["sweep_failed_share"] = round(total_failed / total, 4) if total else None
    if failed:
        first = failed[0]
        v["sweep_first_failed_at"] = at("concurrency" if unit == "" else "rate", first["load"])
        v["sweep_first_failed_n"] = int(first.get("failed") or 0)
        v["sweep_first_failed_all"] = not first.get("completed")
        v["sweep_failed_points"] = len(failed)
        v["sweep_failed_from_first"] = first is pts[0]
        v["sweep_failure_cause"] = ("all-failed" if v["sweep_first_failed_all"] else
                                    "from-lightest" if first is pts[0] else "under-load")


def _past_knee(v: dict, pts: list[dict], knee: int, unit: str) -> None:
    beyond = pts[knee + 1:]
    v["sweep_beyond_knee_n"] = len(beyond)
    if beyond:
        top = beyond[-1]
        st = _step(pts[knee], top)
        if st:
            v["sweep_top_gain_pct"] = round(100 * st["gain"], 1)
            v["sweep_top_rise_x"] = round(1 + st["rise"], 1) if st["rise"] is not None else None
    # production concurrency from a server log in the same analysis
    obs = v.get("running_mean")
    if obs is not None and unit == "":
        v["sweep_observed_vs_knee"] = round(obs / pts[knee]["load"], 2) if pts[knee]["load"] else None

def _run_at(v: dict, unit: str) -> None:
    """Where past-the-knee says to run: the knee, or the SLO point when targets were given (the
    report's recommended load: one answer in every place)."""
    if v.get("sweep_knee") is None:
        return
    run_at = v["sweep_recommended"] if v.get("sweep_recommended_basis") == "targets" else v["sweep_knee"]
    v["sweep_run_at"] = at("concurrency" if unit == "" else "rate", run_at)
    dp = int(v.get("data_parallel_size") or 1)
    if unit == "" and v.get("sweep_limit") != "max_num_seqs":
        v["sweep_cap_suggested"] = max(1, math.ceil(run_at / dp))


def _fuse(ev, pts: list[dict]) -> None:
    """The server log's stats during each run (runs that say when they ran, a log that says when
    its stats were taken): running, waiting and KV usage as the engine saw that load."""
    from datetime import timedelta
    rows = [r for r in ev.stats_rows if r.get("time") is not None]
    if not rows:
        return
    for p in pts:
        inside = [r for r in rows for start, dur in p.get("windows", [])
                  if start <= r["time"] <= start + timedelta(seconds=dur)]
        if not inside:
            continue
        def col(k):
            return [r[k] for r in inside if r.get(k) is not None]
        p["server_samples"] = len(inside)
        for k, agg in (("running", "mean"), ("waiting", "mean"), ("kv_usage", "max"), ("running", "max")):
            xs = col(k)
            if xs:
                p[f"server_{k}_{agg}"] = round(sum(xs) / len(xs) if agg == "mean" else max(xs), 1)


def _limit(ev, v: dict, p: dict, nxt: dict | None = None) -> None:
    """Why the knee is there: the engine's cap, KV capacity, prefill of long prompts, the GPU.
    Measured first — the server log during the runs at and past the knee — then the arithmetic."""
    dp = int(v.get("data_parallel_size") or 1)
    load = p["load"]
    if v.get("sweep_axis") != "concurrency":
        v["sweep_limit"] = "unknown"
        return
    cap = v.get("max_num_seqs") or p.get("max_num_seqs")
    seen = [x for x in (p, nxt) if x and x.get("server_samples")]
    if seen:
        kv = max(x.get("server_kv_usage_max") or 0 for x in seen)
        run_max = max(x.get("server_running_max") or 0 for x in seen)
        waiting = max(x.get("server_waiting_mean") or 0 for x in seen)
        if kv >= 90:
            v["sweep_limit"] = "kv-capacity"
            v["sweep_limit_why"] = f"the server log shows the KV cache at {kv:g} % during these runs"
            return
        if cap and run_max >= 0.95 * cap and waiting >= 1:
            v["sweep_limit"] = "max_num_seqs"
            v["sweep_limit_why"] = (f"the server log shows the running batch at its cap ({int(cap)}) with "
                                    f"{waiting:g} waiting during these runs")
            return
        v["sweep_limit"] = "compute"
        v["sweep_limit_why"] = (f"the server log shows KV usage at most {kv:g} % and the batch below its cap "
                                f"during these runs: the GPU's batch throughput is the limit")
        return
    kv_tokens = v.get("kv_cache_tokens")
    per_req = (p.get("input_len_mean") or 0) + (p.get("output_len_mean") or 0)
    if cap and 0.75 <= load / (cap * dp) <= 1.5:
        v["sweep_limit"] = "max_num_seqs"
        v["sweep_limit_why"] = f"the knee sits at the engine's sequence cap ({int(cap)} × {dp} replica(s))"
    elif kv_tokens and per_req and 0.6 <= load / (kv_tokens * dp / per_req) <= 1.5:
        v["sweep_limit"] = "kv-capacity"
        v["sweep_limit_why"] = (f"the KV cache holds about {int(kv_tokens * dp / per_req)} requests of "
                                f"{int(per_req)} tokens: the knee is where it fills")
    elif v.get("decode_bound_tps") and p.get("output_tps") and load <= 32 and p["output_tps"] >= 0.8 * load * v["decode_bound_tps"]:
        v["sweep_limit"] = "memory-bandwidth"
        v["sweep_limit_why"] = "per-token speed at the knee is at the GPU's memory-bandwidth roofline"
    elif p.get("input_len_mean") and p.get("output_len_mean") and p["input_len_mean"] >= 4 * p["output_len_mean"] and load <= 4 * dp:
        v["sweep_limit"] = "prefill-contention"
        v["sweep_limit_why"] = "long prompts at a few requests per replica: prefills take turns with decodes"
    elif cap or kv_tokens:
        v["sweep_limit"] = "compute"
        v["sweep_limit_why"] = "below the sequence cap and the KV capacity: the GPU's batch throughput is the limit"
    else:
        v["sweep_limit"] = "unknown"
        v["sweep_limit_why"] = "give the server log of the run to say which"


def _targets(v: dict, pts: list[dict], unit: str) -> None:
    checks = []     # (name, point key chooser, target)
    if v.get("target_ttft_p50_s") is not None:
        checks.append(("TTFT p50", lambda p: p.get("ttft_p50_ms") if p.get("ttft_p50_ms") is not None else p.get("ttft_mean_ms"),
                       v["target_ttft_p50_s"] * 1000, "ms"))
    if v.get("target_ttft_p99_s") is not None:
        checks.append(("TTFT p99", lambda p: p.get("ttft_p99_ms"), v["target_ttft_p99_s"] * 1000, "ms"))
    if v.get("target_tpot_s") is not None:
        checks.append(("TPOT", lambda p: p.get(_tpot(p)[0]) if _tpot(p)[0] else None, v["target_tpot_s"] * 1000, "ms"))
    if v.get("target_output_tps") is not None:
        # per-request speed: 1000 / TPOT; a higher target is a lower TPOT ceiling
        checks.append(("TPOT for the output tok/s per request", lambda p: p.get(_tpot(p)[0]) if _tpot(p)[0] else None,
                       1000 / v["target_output_tps"] if v["target_output_tps"] else math.inf, "ms"))
    if not checks:
        if v.get("sweep_knee") is not None:
            v["sweep_recommended"], v["sweep_recommended_basis"] = v["sweep_knee"], "knee"
        return
    checkable = [c for c in checks if any(c[1](p) is not None for p in pts)]
    v["sweep_targets_unchecked"] = ", ".join(c[0] for c in checks if c not in checkable) or None
    if not checkable:
        return
    v["sweep_targets_checked"] = True
    meets = []
    for p in pts:
        ok = all(c[1](p) is not None and c[1](p) <= c[2] for c in checkable)
        p["meets_targets"] = ok
        if ok and not ((p.get("failed") or 0) > 0):
            meets.append(p)
    v["sweep_meeting_n"] = len(meets)
    if meets:
        best = meets[-1]
        v["sweep_recommended"], v["sweep_recommended_basis"] = best["load"], "targets"
        return
    first = pts[0]
    misses = []
    for name, get, target, u in checkable:
        x = get(first)
        if x is not None and x > target:
            shown = (_tpot(first)[1] if name.startswith("TPOT") else
                     "mean TTFT" if name == "TTFT p50" and first.get("ttft_p50_ms") is None else name)
            misses.append(f"{shown} {x:.3g} {u} (target {target:.3g})")
            if name.startswith("TPOT"):
                v["sweep_tpot_factor"] = round(x / target, 2)
            elif name.startswith("TTFT"):
                v["sweep_ttft_factor"] = max(v.get("sweep_ttft_factor") or 0, round(x / target, 2))
    v["sweep_slo_misses"] = "; ".join(misses) or "a run with failed requests"
    v["sweep_lightest"] = at("concurrency" if unit == "" else "rate", first["load"])
    v["sweep_lightest_is_one"] = first["load"] <= 1 if unit == "" else False


def at(axis: str, load: float) -> str:
    return f"concurrency {_fmt(load)}" if axis == "concurrency" else f"{_fmt(load)} req/s"


def describe(p: dict, sw: dict) -> str:
    """One run as evidence: its load and the figures the rules compare."""
    parts = [at(sw["axis"], p["load"]) + (" (all prompts at once)" if p.get("burst") else "")]
    if p.get("output_tps") is not None:
        parts.append(f"{p['output_tps']:,.0f} output tok/s")
    k, name = _ttft(p)
    if k:
        parts.append(f"{name} {p[k]:,.0f} ms")
    k, name = _tpot(p)
    if k:
        parts.append(f"{name} {p[k]:.1f} ms")
    if p.get("completed") is not None:
        parts.append(f"{int(p['completed'])} completed")
    if p.get("failed") is not None:       # a tool that does not count failures: not "0 failed"
        parts.append(f"{int(p['failed'])} failed")
    return ", ".join(parts)


def sweep_json(sw: dict) -> dict:
    """The report's `sweep` object (JSON schema version 1): the curve, the knee, the recommendation."""
    conc = sw["axis"] == "concurrency"
    pts = []
    for p in sw["points"]:
        pts.append({"concurrency": p["load"] if conc else None, "request_rate": None if conc else p["load"],
                    "output_tps": _r(p.get("output_tps")), "request_tps": _r(p.get("request_tps"), 3),
                    "ttft_p50_ms": _r(p.get("ttft_p50_ms")), "ttft_p99_ms": _r(p.get("ttft_p99_ms")),
                    "ttft_mean_ms": _r(p.get("ttft_mean_ms")), "tpot_p50_ms": _r(p.get("tpot_p50_ms")),
                    "itl_p50_ms": _r(p.get("itl_p50_ms")), "itl_mean_ms": _r(p.get("itl_mean_ms")),
                    "completed": _int(p.get("completed")), "failed": _int(p.get("failed")),
                    "meets_targets": p.get("meets_targets"), "runs": p["runs"],
                    "server_running_mean": p.get("server_running_mean"), "server_waiting_mean": p.get("server_waiting_mean"),
                    "server_kv_usage_max": p.get("server_kv_usage_max"),
                    "source": p["source"], "line": p["line"]})
    return {"tool": sw["tool"], "axis": sw["axis"], "burst": sw["burst"], "rule": sw["rule"], "points": pts,
            "knee_concurrency": sw["knee"] if conc else None, "knee_request_rate": None if conc else sw["knee"],
            "recommended_concurrency": sw["recommended"] if conc else None,
            "recommended_request_rate": None if conc else sw["recommended"],
            "recommended_basis": sw["recommended_basis"], "limit": sw["limit"] or ("unknown" if sw["knee"] is not None else None),
            "other_runs": sw["other_runs"]}


def _r(x, nd: int = 1):
    return None if x is None else round(x, nd)


def _int(x):
    return None if x is None else int(x)


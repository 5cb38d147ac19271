"""Before/after: config differences first, then findings new/fixed/unchanged, then key signals
with a noise-aware verdict.

The noise rule, stated once and shown in reports:
- a side needs at least MIN_SAMPLES steady-state samples, else *inconclusive*;
- a side whose coefficient of variation (std / mean) exceeds MAX_CV is too noisy: *inconclusive*;
- a change counts only when it exceeds both MIN_REL_CHANGE of the baseline and Z standard errors
  of the difference (Welch); otherwise *unchanged*. Never a confident verdict from noise.
"""
from __future__ import annotations

import math

MIN_SAMPLES = 5
MAX_CV = 0.5
MIN_REL_CHANGE = 0.05
Z = 2.0
# +1: higher is better; -1: lower is better; 0: neutral (KV usage: worse only near the limit).
DIRECTION = {"generation_throughput": 1, "prompt_throughput": 1, "running": 1, "waiting": -1,
             "preemption_rate": -1, "gpu_util": 1, "kv_cache_usage": 0,
             "ttft_p50": -1, "ttft_p99": -1, "itl_p50": -1}
RULE_TEXT = (f"needs ≥ {MIN_SAMPLES} samples per side and a coefficient of variation ≤ {MAX_CV}; a change counts "
             f"when it exceeds {int(MIN_REL_CHANGE * 100)} % and {Z:g} standard errors")
from ..evidence.facts import CONFIG_KEYS  # noqa: E402  (the settings the fact catalogue marks `compare`)


def compare(before: dict, after: dict) -> dict:
    b_dep, a_dep = before.get("deployment", {}), after.get("deployment", {})
    changes = [{"key": k, "before": b_dep.get(k), "after": a_dep.get(k)}
               for k in CONFIG_KEYS if b_dep.get(k) != a_dep.get(k)]
    b_ids = {f["id"] for f in before.get("findings", [])}
    a_ids = {f["id"] for f in after.get("findings", [])}
    signals = {}
    bs, as_ = before.get("signals") or {}, after.get("signals") or {}
    for name in sorted(set(bs) | set(as_), key=lambda n: list(DIRECTION).index(n) if n in DIRECTION else 99):
        if "mean" not in (bs.get(name) or {}) and "mean" not in (as_.get(name) or {}):
            continue        # a single value per window (a window quantile): no spread to judge a change by
        signals[name] = judge(name, bs.get(name), as_.get(name))
    out = {"rule": RULE_TEXT, "config_changes": changes, "new": sorted(a_ids - b_ids),
           "fixed": sorted(b_ids - a_ids), "unchanged": sorted(a_ids & b_ids), "signals": signals}
    if before.get("sweep") and after.get("sweep"):
        sweep = compare_sweeps(before["sweep"], after["sweep"])
        if sweep:
            signals.update(sweep.pop("points"))
            out["sweep"] = sweep
            out["rule"] += f"; load-sweep runs (one run per load: no spread) change when they move by more than {int(SWEEP_REL * 100)} %"
    return out


SWEEP_REL = 0.10    # one benchmark run per load has no spread to judge by: a fixed band, above run-to-run noise


def compare_sweeps(b: dict, a: dict) -> dict | None:
    """Before/after per load level both sweeps measured: output tokens/s, TTFT and TPOT (the same
    statistic on both sides), and the knee."""
    if b.get("axis") != a.get("axis"):
        return None
    key = "concurrency" if a["axis"] == "concurrency" else "request_rate"
    bp = {p[key]: p for p in b["points"] if p.get(key) is not None}
    ap = {p[key]: p for p in a["points"] if p.get(key) is not None}
    common = sorted(set(bp) & set(ap))
    if not common:
        return None

    def shared(*keys):
        return next((k for k in keys if any(bp[x].get(k) is not None and ap[x].get(k) is not None for x in common)), None)
    metrics = [("output_tps", "output tok/s", 1), (shared("ttft_p99_ms", "ttft_p50_ms", "ttft_mean_ms"), "TTFT ms", -1),
               (shared("tpot_p50_ms", "itl_p50_ms", "itl_mean_ms"), "TPOT ms", -1)]
    points = {}
    for load in common:
        where = f"{load:g}" + ("" if key == "concurrency" else " req/s")
        for m, label, direction in metrics:
            x, y = (bp[load].get(m), ap[load].get(m)) if m else (None, None)
            if x is None or y is None or not x:
                continue
            ch = (y - x) / x
            verdict = "unchanged" if abs(ch) <= SWEEP_REL else ("better" if ch * direction > 0 else "worse")
            name = m.replace("_ms", "").replace("_", " ") if m != "output_tps" else "output tok/s"
            points[f"sweep {name} at {key.replace('_', ' ')} {where}"] = {"before": x, "after": y, "change": round(ch, 3),
                                                                        "verdict": verdict}
    kb = b.get("knee_concurrency") if key == "concurrency" else b.get("knee_request_rate")
    ka = a.get("knee_concurrency") if key == "concurrency" else a.get("knee_request_rate")
    return {"axis": a["axis"], "loads": common, "knee_before": kb, "knee_after": ka, "points": points}


def judge(name: str, b: dict | None, a: dict | None) -> dict:
    out = {"before": b.get("mean") if b else None, "after": a.get("mean") if a else None,
           "change": None, "verdict": "inconclusive"}
    if not b or not a or b.get("mean") is None or a.get("mean") is None:
        out["reason"] = "missing on one side"
        return out
    mb, ma = float(b["mean"]), float(a["mean"])
    out["change"] = round((ma - mb) / mb, 3) if mb else None
    nb, na = int(b.get("n") or 0), int(a.get("n") or 0)
    if nb < MIN_SAMPLES or na < MIN_SAMPLES:
        out["reason"] = f"too few samples ({nb} before, {na} after; need {MIN_SAMPLES})"
        return out
    sb, sa = b.get("std"), a.get("std")
    if sb is None or sa is None:
        out["reason"] = "no spread recorded"
        return out
    for side, m, s in (("before", mb, sb), ("after", ma, sa)):
        if m and s / abs(m) > MAX_CV:
            out["reason"] = f"too noisy {side} (coefficient of variation {s / abs(m):.2f} > {MAX_CV})"
            return out
    se = math.sqrt(sb * sb / nb + sa * sa / na)
    diff = ma - mb
    big = abs(diff) > Z * se and (abs(diff) > MIN_REL_CHANGE * abs(mb) if mb else abs(diff) > 0)
    if not big:
        out["verdict"] = "unchanged"
        return out
    d = DIRECTION.get(name, 0)
    if d == 0:   # KV usage: a bigger share is only worse when it nears the limit
        p95 = a.get("p95") or ma
        out["verdict"] = "worse" if diff > 0 and p95 >= 90 else "better" if diff < 0 and (b.get("p95") or mb) >= 90 else "unchanged"
        return out
    out["verdict"] = "better" if diff * d > 0 else "worse"
    return out

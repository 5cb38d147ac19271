"""The run's one bottleneck verdict, with the two or three signals that decided it.

idle · client-bound · queue-saturated · kv-capacity-bound · prefill-bound · decode-bound ·
compute-bound · host-bound · communication-bound · misconfigured · healthy (· unknown when the
input holds no runtime evidence at all) — or `crashed`: an engine that died is the verdict's
first word, whatever its stats said before, with what it was before it died (`before_crash`).
A verdict never goes without the signals that decided it, also when no rule fired.
"""
from __future__ import annotations

from ..values import fmt


def decide(values: dict, findings: list) -> dict:
    r = _decide(values, findings)
    if not r.get("signals"):
        r["signals"] = [_basis_line(values)]
    crash = next((f for f in findings if f.id == "engine-crash"), None)
    if crash is None:
        if values.get("stopped"):
            _say_stopped(r, values)
        return r
    # A dead engine is the verdict, never contradicted by what its stats said before it died.
    before = r["bottleneck"]
    said = "; ".join(x for x in r["signals"][:2] if "expected bound" not in x)
    signals = [crash.title.rstrip(".")]
    if before not in ("unknown",) or not said.startswith("the engine failed"):
        signals.append(f"before it: {before}" + (f" ({said})" if said and before != "unknown" else ""))
    return {"bottleneck": "crashed", "signals": signals, "basis": r["basis"], "before_crash": before,
            "also": [a for a in r["also"] if not a.startswith("failed")] +
                    (["failed: cuda-oom"] if any(f.id == "cuda-oom" for f in findings) else []),
            "config_findings": r.get("config_findings", [])}


def _say_stopped(r: dict, v: dict) -> None:
    """An orderly stop ends the story: said last (the bottleneck comes first), with the errors the
    stop printed counted and kept for --verbose."""
    noise = v.get("stop_noise_count") or 0
    at = f" at {v['stopped_at']}" if v.get("stopped_at") else ""
    r["signals"] = list(r["signals"]) + [
        f"the server was stopped{at} (line {v['stopped_where'].rpartition(':')[2]}: {v['stopped_text']})"
        + (f"; {noise} error(s) after it were the stop's, not a crash" if noise else "")]
    source, _, line = v["stopped_where"].rpartition(":")
    r["stopped"] = {"at": v.get("stopped_at"), "source": source, "line": int(line), "text": v["stopped_text"],
                    "errors_after": noise, "errors_after_examples": v.get("stop_noise") or []}


def _basis_line(v: dict) -> str:
    """What the steady window showed, when nothing else speaks for the verdict."""
    parts = [f"{label} {fmt(v[k])}" for k, label in (("running_mean", "running mean"), ("waiting_mean", "waiting mean"),
                                                       ("kv_usage_p95", "KV usage p95 %"), ("gen_tps_mean", "generation tokens/s"))
             if v.get(k) is not None]
    return ("no rule fired; " + ", ".join(parts)) if parts else "no runtime signal in the input (no engine stats or GPU samples)"


def _decide(values: dict, findings: list) -> dict:
    v = values
    fired = {f.id: f for f in findings}
    config_bad = [f.id for f in findings if f.domain == "config" and f.severity in ("critical", "high")]
    failed = [i for i in ("engine-crash", "cuda-oom") if i in fired]

    def out(b, signals, basis="engine stats"):
        also = []
        ratio = v.get("decode_vs_bound")
        if ratio is not None:   # the roofline: is this the configuration, or the hardware's limit?
            levers = [f"`{i}`" for i in config_bad] or ["more concurrent requests"]
            signals = list(signals) + [
                f"decode at {ratio * 100:.0f} % of the expected bound ({fmt(v.get('gen_tps_per_request'))} of "
                f"{fmt(v.get('decode_bound_tps'))} tokens/s per sequence): "
                + ("working as well as the hardware allows" if ratio >= 0.7 else
                   "below the hardware's limit — levers: " + ", ".join(levers))]
        if b in ("communication-bound", "compute-bound"):   # the layout is the explanation, not a second problem
            config_bad[:] = [i for i in config_bad if i not in ("cross-node-tensor-parallel", "nccl-socket-fallback")]
        if b != "misconfigured" and config_bad:
            also.append("misconfigured")
        if failed:
            also.append("failed: " + ", ".join(failed))
        sig = [x for x in signals if x]
        roof = [x for x in sig if "expected bound" in x]
        return {"bottleneck": b, "signals": [x for x in sig if x not in roof][:3] + roof, "basis": basis, "also": also,
                "config_findings": config_bad}

    if not v.get("stats_samples") and v.get("gpu_util_mean") is not None:
        gpu_only = {"compute-bound": "compute-bound", "host-bound": "host-bound"}
        for rid, b in gpu_only.items():
            if rid in fired:
                return out(b, [_gpu_line(v), "no engine log given: the runtime side is unknown",
                               _board_hint(v)], "GPU samples only")
        return out("unknown", [f"GPU {fmt(v['gpu_util_mean'])} % busy; no engine stats in the input"], "GPU samples only")
    if not v.get("stats_samples"):
        if failed:
            return {"bottleneck": "unknown", "signals": [f"the engine failed ({', '.join(failed)}) before any runtime stats"],
                    "basis": "failures", "also": ["misconfigured"] if config_bad else [], "config_findings": config_bad}
        if config_bad:
            return out("misconfigured", [f"`{i}`" for i in config_bad], "configuration")
        if v.get("sweep_points_n"):     # a benchmark sweep alone: what it measured, not a runtime verdict
            knee = v.get("sweep_knee_at")
            return out("unknown", [f"a load sweep of {v['sweep_points_n']} load level(s): "
                                   + (f"knee at {knee}, limited by {v.get('sweep_limit') or 'unknown'}" if knee else "no knee by the rule")
                                   + "; give the server log of the run for a runtime verdict"], "load sweep")
        if v.get("server_ready") and (v.get("requests_served") or 0) <= 2:
            # Up, and (next to) nothing asked of it: idle. Without the ready line it stays unknown.
            n = v.get("requests_served") or 0
            return out("idle", [f"the server said it was ready and logged no engine stats; {n} request(s) in the log"
                                + (": it served nothing" if not n else ": a test request or two")])
        stalled = ([f"the server never said it was ready: nothing was logged for {fmt(v['startup_silence_min'])} min "
                    f"before it was stopped; the last line before the silence: {v.get('startup_silence_after')}"]
                   if v.get("startup_silence_min") else [])
        return out("unknown", stalled + ["no periodic engine stats in the input (runtime bottleneck cannot be judged)"],
                   "start-up" if stalled else "none")
    if v.get("single_scrape"):
        # Its counters and histograms hold the server's whole life: said as such.
        life = [f"{fmt(v['lifetime_requests'])} requests"] if v.get("lifetime_requests") is not None else []
        life += [f"{label} mean {fmt(v[f'lifetime_{kind}_mean_s'])} s" for kind, label in
                 (("ttft", "TTFT"), ("e2e", "end-to-end"), ("itl", "ITL")) if v.get(f"lifetime_{kind}_mean_s") is not None]
        return out("unknown", ["a single metrics scrape: configuration and current state only (no trend, no steady window)",
                               ("since the server started: " + ", ".join(life)) if life else None], "one scrape")
    if v.get("activity_unknown"):
        return out("unknown", ["no running/waiting requests, throughput or latency in these series: whether it "
                               "served at all is unknown (not idle)"], "none")
    served = v.get("requests_in_window")     # a histogram's count grew: requests finished, whatever the gauges said
    if v.get("too_few_samples") and served is not None and served > 2:
        return out("unknown", [f"{fmt(served)} requests finished in the window, but only {v.get('busy_samples')} "
                               f"stats sample(s) with work: too few to judge a steady state (not idle)"])
    if v.get("too_few_samples") and (v.get("busy_running_max") or 0) <= 1 and not v.get("busy_waiting_max") and not failed:
        busy = (f"at most {fmt(v.get('busy_running_max'))} running, none waiting")
        return out("idle", [(f"{v.get('idle_samples')} idle stats samples; only {v.get('busy_samples')} with any work ({busy})"
                             if v.get("idle_samples") else f"only {v.get('busy_samples')} stats sample(s), {busy}")
                            + ": a test request or two"])
    if v.get("too_few_samples"):
        return out("unknown", [f"only {v.get('steady_samples')} busy stats sample(s): too few to judge a steady state"])
    if v.get("all_idle"):
        # Only what was measured is said: a gauge the input lacks is unknown, not 0.
        said = [x for x, k in (("0 running", "running_known"), ("0 waiting", "waiting_known"),
                               ("no throughput", "gen_tps_known")) if v.get(k, True)]
        return out("idle", [f"{v.get('idle_samples')} stats samples, all with " + (" / ".join(said) or "no work")])
    kv = f"KV usage p95 {fmt(v.get('kv_usage_p95'))} %" if v.get("kv_usage_p95") is not None else None
    if kv and (v.get("kv_spread_max") or 0) >= 10:      # DP engines: the fullest, and how far apart they run
        kv += f" (the fullest data-parallel engine; engines up to {fmt(v['kv_spread_max'])} points apart)"
    wait = f"waiting mean {fmt(v.get('waiting_mean'))} (max {fmt(v.get('waiting_max'))})" if v.get("waiting_mean") is not None else None
    run = f"running mean {fmt(v.get('running_mean'))} (max {fmt(v.get('running_max'))})" if v.get("running_mean") is not None else None
    evicted = (f"preemptions/retractions {fmt(v['preemptions_total'])}" if v.get("preemptions_total")
               else f"paused requests in {v['paused_samples']} samples (peak {v['paused_peak']})" if v.get("paused_samples") else None)
    if "kv-cache-pressure" in fired or "kv-capacity-low" in fired and (v.get("kv_usage_p95") or 0) >= 90:
        return out("kv-capacity-bound", [evicted, kv, wait])
    if "concurrency-cap" in fired or "queue-buildup" in fired:
        return out("queue-saturated", [wait, run, kv])
    # A queue needs requests running beside it, or waiting that lasts (most samples): one burst
    # of arrivals caught by a scrape while nothing ran is not a saturated server.
    sustained = (v.get("waiting_nonzero_share") or 0) >= 0.5
    if (v.get("waiting_mean") or 0) >= 1 and ((v.get("running_mean") or 0) > 0 or sustained):
        # Requests waited while others ran, and no rule names why: said, so that the verdict does
        # not stand above "No findings" unexplained.
        return out("queue-saturated", [wait, "no rule names a cause: not held at the max_num_seqs cap for long, "
                                       "KV cache not full (see the timeline)" if (v.get("running_mean") or 0) > 0 else
                                       "requests waited in most samples while none ran: the server admits no work", run])
    if "prefill-bound" in fired:
        share = v.get("prefill_time_share")
        if v.get("prefill_time_mean_s") is not None:       # measured (stage histograms) beats estimated
            stage = (f"prefill {fmt(v['prefill_time_mean_s'])} s per request on average"
                     + (f", queue {fmt(v['queue_time_mean_s'])} s" if v.get("queue_time_mean_s") is not None else "")
                     + (f" (TTFT p95 {fmt(v['ttft_p95_s'])} s)" if v.get("ttft_p95_s") is not None else ""))
        elif share is not None:
            stage = f"prefill about {fmt(round(share * 100))} % of GPU time (estimated)"
        else:
            stage = f"TTFT p95 {fmt(v.get('ttft_p95_s'))} s"
        return out("prefill-bound", [stage, wait, run])
    gpu = _gpu_line(v, median=True) if v.get("gpu_util_mean") is not None else None
    if "compute-bound" in fired:
        r = out("compute-bound", [gpu + " — the configuration is not the cause", run, _board_hint(v),
                                  f"{fmt(v.get('gen_tps_per_request'))} tokens/s per request" if v.get("gen_tps_per_request") is not None else None],
                "GPU samples + engine stats")
        return r
    if "host-bound" in fired:
        return out("host-bound", [gpu + " (busy, little real work: launch overhead)", run, _board_hint(v),
                                  "CUDA graphs off" if v.get("cuda_graphs") is False else None], "GPU samples + engine stats")
    if v.get("tp_spans_nodes"):
        per = v.get("gen_tps_per_request")
        return out("communication-bound", [
            f"tensor parallel size {fmt(v.get('tensor_parallel_size'))} spans {fmt(v.get('nodes') or 2)} nodes"
            + (f" (NCCL network {v.get('nccl_network')})" if v.get("nccl_network") else ""),
            f"{fmt(per)} tokens/s per running request" if per is not None else run, wait])
    if "client-bound" in fired:
        return out("client-bound", [run, wait, kv])
    if "decode-bound" in fired:
        return out("decode-bound", [f"{fmt(v.get('gen_tps_per_request'))} tokens/s per request", run, kv])
    # A handful running, none waiting, KV nearly empty: the offered load is the limit, whether or
    # not every input the client-bound rule weighs is known (a configuration finding is "also":
    # it slows each request, it does not bound the load). Never "healthy".
    jitter = ((v.get("waiting_nonzero_share") or 0) <= 0.1 and (v.get("waiting_run_max") or 0) <= 2
              and (v.get("waiting_mean") or 0) < 0.5)    # a request or two waiting now and then (client-bound's rule)
    # (A prefill node of a disaggregated deployment hands every request on: its `running` stays 0,
    # its work is the prompts it prefills.)
    working = (v.get("running_mean") or 0) > 0 or (v.get("node_role") == "prefill" and (v.get("prompt_tps_mean") or 0) > 0)
    if (((v.get("waiting_max") or 0) == 0 or jitter) and working and v.get("kv_usage_p95") is not None
            and v["kv_usage_p95"] < 20 and not (v.get("prefill_time_share") or 0) >= 0.5 and not v.get("cpu_backend")
            and not (v.get("gen_tps_gain_per_load") or 1) < 0.6):
        if v.get("node_role") == "prefill" and not (v.get("running_mean") or 0):
            run = (f"a prefill node: each request is handed to the decode side (running stays 0); "
                   f"prompt tokens/s mean {fmt(v.get('prompt_tps_mean'))}")
        return out("client-bound", [run, wait, kv])
    if config_bad:
        return out("misconfigured", [f"`{i}`" for i in config_bad])
    if failed:   # a server that crashed is not healthy, whatever its stats said before
        return out("unknown", [f"the engine failed ({', '.join(failed)}) after serving", run, wait], "failures")
    return out("healthy", [run, wait, kv])


def _gpu_line(v: dict, median: bool = False) -> str:
    util = f"GPU {fmt(v.get('gpu_util_p50' if median else 'gpu_util_mean'))} % busy" + (" (median)" if median else "")
    if v.get("gpu_power_frac") is not None:
        return f"{util} at {fmt(v.get('gpu_power_mean'))} W of {fmt(v.get('gpu_power_limit_w'))} W"
    if v.get("gpu_mem_util_mean") is not None:
        return f"{util}, memory controller {fmt(v['gpu_mem_util_mean'])} % busy"
    return util


def _board_hint(v: dict) -> str | None:
    """Without the board, power cannot be judged against its limit: say how to sharpen it."""
    if v.get("gpu_power_frac") is None and v.get("gpu_util_mean") is not None:
        return "GPU board not named in the input: --gpu-name (e.g. H100) lets power be judged against its limit"
    return None

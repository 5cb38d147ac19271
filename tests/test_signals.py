"""The steady-window figures that rules read, from engine stats rows: what they are, and that
they stay those polars computes (they were computed with polars before, and reports are compared
across versions with `--baseline`)."""
from __future__ import annotations

import random
from datetime import datetime, timedelta

import polars as pl
import pytest

from diagnose.evidence.model import Evidence
from diagnose.signals.derive import derive

T0 = datetime(2025, 3, 2, 11, 0, 0)


def _evidence(rows):
    ev = Evidence()
    for i, r in enumerate(rows):
        ev.add_stats({"time": T0 + timedelta(seconds=10 * i), "source": "x.log", "line": i + 1, "engine_idx": 0, **r})
    return ev


@pytest.mark.parametrize("seed", range(8))
def test_steady_window_figures_equal_polars(seed):
    rnd = random.Random(seed)
    n = rnd.randint(5, 400)

    def maybe(x):
        return None if rnd.random() < 0.1 else x

    rows = [{"running": float(rnd.randint(1, 256)), "waiting": maybe(float(rnd.randint(0, 50))),
             "kv_usage": maybe(round(rnd.uniform(0, 100), 1)), "gen_tps": round(rnd.uniform(1, 5000), 1),
             "prompt_tps": maybe(round(rnd.uniform(0, 20000), 1)), "prefix_hit": maybe(round(rnd.uniform(0, 90), 1))}
            for _ in range(n)]
    s = derive(_evidence(rows))
    v = s.values
    # Every row is busy (running > 0); the first is left out (the interval before it may be idle).
    assert v["busy_samples"] == n and v["steady_samples"] == n - 1
    rows = rows[1:]
    for col in ("running", "waiting", "kv_usage", "gen_tps", "prompt_tps", "prefix_hit"):
        x = pl.Series([r[col] for r in rows], dtype=pl.Float64).drop_nulls()
        assert v[f"{col}_mean"] == pytest.approx(round(x.mean(), 3), abs=1e-3)
        assert v[f"{col}_max"] == round(x.max(), 3)
        assert v[f"{col}_p50"] == round(x.quantile(0.5, "nearest"), 3)
        assert v[f"{col}_p95"] == round(x.quantile(0.95, "nearest"), 3)
    ks = s.key_stats["generation_throughput"]
    g = pl.Series([r["gen_tps"] for r in rows])
    assert ks["n"] == n - 1 and ks["std"] == pytest.approx(round(g.std(), 3), abs=1e-3)
    both = [(r["prompt_tps"], r["gen_tps"]) for r in rows if r["prompt_tps"] is not None]
    assert v["prompt_share"] == pytest.approx(sum(p for p, _ in both) / sum(p + g for p, g in both), abs=1e-3)


def test_the_first_busy_sample_after_idle_and_idle_samples_are_left_out():
    rows = ([{"running": 0.0, "waiting": 0.0, "gen_tps": 0.0}] * 3
            + [{"running": 1.0, "waiting": 0.0, "gen_tps": 10.0}]          # partly idle interval
            + [{"running": 8.0, "waiting": 2.0, "gen_tps": 400.0}] * 5)
    v = derive(_evidence(rows)).values
    assert (v["idle_samples"], v["busy_samples"], v["steady_samples"]) == (3, 6, 5)
    assert v["running_mean"] == 8.0 and v["gen_tps_per_request"] == 50.0


def test_a_growing_queue_has_a_slope_per_minute_and_a_flat_one_no_trend():
    growing = derive(_evidence([{"running": 64.0, "waiting": 2.0 * i, "gen_tps": 900.0} for i in range(12)])).values
    assert growing["waiting_slope_per_min"] == 12.0 and growing["waiting_trend_r2"] == 1.0
    flat = derive(_evidence([{"running": 64.0, "waiting": 5.0, "gen_tps": 900.0} for _ in range(12)])).values
    assert flat["waiting_slope_per_min"] == 0.0 and flat["waiting_trend_r2"] == 0.0


def test_dp_engines_logging_the_same_tick_become_one_sample():
    ev = Evidence()
    for i in range(6):
        for e in range(2):      # engine 1 logs a second after engine 0
            ev.add_stats({"time": T0 + timedelta(seconds=10 * i + e), "source": "x.log", "line": 2 * i + e + 1,
                          "engine_idx": e, "running": 10.0 + e, "waiting": 1.0, "gen_tps": 300.0,
                          "kv_usage": 40.0 + 20 * e, "graph": True if e == 0 and i < 3 else None})
    s = derive(ev)
    v = s.values
    assert v["dp_engines_logged"] == 2 and v["busy_samples"] == 6 and v["steady_samples"] == 5
    assert v["running_mean"] == 21.0 and v["gen_tps_mean"] == 600.0
    # Each engine has its own KV cache: the fullest one (60 %) is what evicts first, as vLLM's
    # dashboards show it, and the spread says how unevenly they fill (an average would say 50 %).
    assert v["kv_usage_mean"] == 60.0 and v["kv_spread_max"] == 20.0
    assert s.timeline["running"] == [21.0] * 6
    # Ticks where no engine said whether decode ran in CUDA graphs are unknown, not "in graphs".
    assert v["decode_graph_off_share"] == 0.0
    ev2 = Evidence()
    for r in ev.stats_rows:
        ev2.add_stats({**r, "graph": None})
    assert derive(ev2).values.get("decode_graph_off_share") is None


def test_a_missing_or_damaged_number_is_unknown_not_zero():
    rows = [{"running": 4.0, "gen_tps": 100.0, "kv_usage": x} for x in (None, float("nan"), float("inf"), 30.0, 50.0)]
    v = derive(_evidence(rows)).values
    assert v["kv_usage_mean"] == 40.0 and v["kv_usage_p50"] in (30.0, 50.0)
    assert derive(_evidence([{"running": 4.0, "gen_tps": 100.0}] * 5)).values["kv_usage_mean"] is None

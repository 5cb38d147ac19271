"""Signals: named numbers and booleans derived from the evidence, the only thing rules read.

A signal that cannot be derived is None (unknown), never 0: rules that need it are then
*not applicable*. `derive()` runs the producers in order (a later one reads what an earlier one
made); each declares the signals it makes (producers.py), and those declarations are the signal
catalogue. Where a producer lives: deployment.py (model, layout, KV capacity, roofline),
events.py (what the log said happened), runtime.py (the stats samples' steady window), gpu.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..evidence.facts import CATALOGUE, SIGNAL_FACTS
from ..evidence.model import Evidence, FACT_NAMES, EXTRA_FACTS
from ..targets import KEYS as TARGET_KEYS
from . import deployment, events, runtime
from .producers import declare

_READ_FACTS = FACT_NAMES + EXTRA_FACTS + SIGNAL_FACTS     # the fact catalogue's facts rules read
FACTS = declare("facts", "facts", numbers=[n for n in _READ_FACTS if CATALOGUE[n]["type"] in ("int", "float")],
                flags=[n for n in _READ_FACTS if CATALOGUE[n]["type"] == "bool"],
                texts=[n for n in _READ_FACTS if CATALOGUE[n]["type"] == "text"])
# A --targets file's goals (targets.apply_targets, run by the pipeline; a lower layer than this).
TARGETS = declare("diagnose.targets.apply_targets", "diagnose.targets",
                  numbers=sorted({name for name, _ in TARGET_KEYS.values()} - set(_READ_FACTS)),
                  flags=("targets_given",))


@dataclass
class Signals:
    values: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)   # signal → evidence dict(s) to cite
    window: str | None = None                        # human description of the steady window
    timeline: dict = field(default_factory=dict)     # name → list of floats (for sparklines)
    steady_range: tuple | None = None                # (first, last) time of the steady window
    samples: dict | None = None                      # the steady window's stats, column -> list (rules' [sustained])
    key_stats: dict = field(default_factory=dict)    # signal name → {mean, std, n, p50, p95} for comparisons
    sweep: dict | None = None                        # a load sweep's curve, knee and advice (sweep.py)

    def get(self, name, default=None):
        v = self.values.get(name)
        return default if v is None else v


def derive(ev: Evidence) -> Signals:
    s = Signals()
    for name in _READ_FACTS:
        s.values[name] = ev.fact(name)
    deployment.model_size(ev, s)
    deployment.parallelism(ev, s)
    events.events(ev, s)
    runtime.runtime(ev, s)
    gpu(ev, s)
    deployment.capacity(ev, s)
    deployment.roofline(ev, s)
    deployment.prefill_time(ev, s)
    deployment.context_asked(ev, s)
    deployment.run_kind(ev, s)
    _preemption_rate(s)
    return s


def gpu(ev: Evidence, s) -> None:
    """GPU samples and topology (gpu.py), cited with their window."""
    from .gpu import gpu_signals
    v = s.values
    basis = gpu_signals(ev, v, s.steady_range)
    if basis and v.get("gpu_util_mean") is not None:
        g = ev.gpu_series["util"].drop_nulls()
        s.key_stats["gpu_util"] = {"mean": v["gpu_util_mean"], "std": round(float(g.std() or 0.0), 3),
                                   "n": v.get("gpu_samples_used") or int(g.len()), "p50": v.get("gpu_util_p50"),
                                   "p95": None}
    if basis:
        s.provenance["gpu"] = {"metric": "GPU utilisation / power", "window": basis,
                               "value": f"util mean {v.get('gpu_util_mean')} %"
                                        + (f", power mean {v['gpu_power_mean']} W" if v.get("gpu_power_mean") is not None else "")
                                        + (f" of {v.get('gpu_power_limit_w')} W ({v.get('gpu_power_limit_source')})" if v.get('gpu_power_limit_w') else "")
                                        + (f", memory controller {v['gpu_mem_util_mean']} %" if v.get("gpu_mem_util_mean") is not None else "")}


def _preemption_rate(s: Signals) -> None:
    v = s.values
    if v.get("preemptions_total") is not None and v.get("window_seconds"):
        s.key_stats["preemption_rate"] = {"mean": round(v["preemptions_total"] / (v["window_seconds"] / 60), 3),
                                          "std": None, "n": v.get("steady_samples"), "p50": None, "p95": None,
                                          "unit": "per minute"}


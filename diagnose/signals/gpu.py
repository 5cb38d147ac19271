"""GPU signals: utilisation, power against the board limit, clocks, spread across ranks and
topology between tensor-parallel ranks — over the engine's steady-state window when the samples
line up in time with the engine stats, else over the busy GPU samples."""
from __future__ import annotations

from collections import Counter

from ..evidence.model import Evidence
from ..capacity.boards import lookup
from .producers import produces

LINK_PCIE = {"PIX", "PXB", "PHB", "NODE", "SYS"}


def gpu_signals(ev: Evidence, v: dict, window: tuple | None) -> str | None:
    """Fill GPU signals into `v`; returns a description of the window used (for evidence)."""
    identity(ev, v)
    topology(ev, v)
    return samples(ev, v, window)


@produces("gpu_busiest", "gpu_idlest", "gpu_mem_used_frac", "gpu_mem_util_mean", "gpu_power_frac",
          "gpu_power_max", "gpu_power_mean", "gpu_samples_used", "gpu_sm_clock_frac", "gpu_sm_clock_mean",
          "gpu_temp_max", "gpu_throttled_share", "gpu_util_max", "gpu_util_mean", "gpu_util_p10",
          "gpu_util_p50", "gpu_util_spread", "gpu_util_swing", "gpus_sampled", texts=("gpu_throttle_reasons",
          "gpu_util_by_gpu", "gpu_window"))
def samples(ev: Evidence, v: dict, window: tuple | None) -> str | None:
    """Utilisation, power, clocks, memory and throttling over the engine's steady window (or the
    busy samples); returns a description of the window used."""
    if not ev.gpu_rows:
        return None
    import polars as pl
    df = ev.gpu_series
    v["gpus_sampled"] = df["gpu"].n_unique()
    basis = None
    if window and ev.counters.get("gpu_aligned") and df["time"].null_count() < df.height:
        t0, t1 = window
        w = df.filter(pl.col("time").is_between(t0, t1))
        if w.height:
            df = w
            basis = f"GPU samples inside the engine's steady window ({w.height} rows)"
    if basis is None:
        busy = df.filter(pl.col("util") > 5) if df["util"].null_count() < df.height else df
        if busy.height >= 3:
            first = busy["cycle"].min()
            trimmed = busy.filter(pl.col("cycle") > first)     # the first busy sample is a partial interval
            df = trimmed if trimmed.height >= 3 else busy
        basis = f"busy GPU samples ({df.height} rows; not aligned with engine stats)" if not ev.stats_rows or not window \
            else f"busy GPU samples ({df.height} rows; times do not line up with the log)"
    v["gpu_window"] = basis
    v["gpu_samples_used"] = df.height

    def col(c):
        x = df[c].drop_nulls()
        return x if x.len() else None

    util = col("util")
    if util is not None:
        v["gpu_util_mean"] = round(float(util.mean()), 1)
        v["gpu_util_p10"] = round(float(util.quantile(0.10, "nearest")), 1)
        v["gpu_util_p50"] = round(float(util.quantile(0.50, "nearest")), 1)
        v["gpu_util_max"] = round(float(util.max()), 1)
        per = df.group_by("gpu").agg(pl.col("util").mean().alias("u"),
                                     pl.col("util").diff().abs().mean().alias("swing")).drop_nulls("u")
        if per.height >= 2:
            v["gpu_util_spread"] = round(float(per["u"].max() - per["u"].min()), 1)
            # group_by hands groups back in any order: GPUs at the same utilisation by index, so
            # that two runs over one input name the same busiest and idlest GPU.
            busiest = per.sort(["u", "gpu"], descending=[True, False])
            v["gpu_busiest"] = int(busiest["gpu"][0])
            v["gpu_idlest"] = int(busiest["gpu"][-1])
            v["gpu_util_by_gpu"] = ", ".join(f"GPU{g}: {u:.0f} %" for g, u in zip(busiest["gpu"], busiest["u"]))
        sw = per["swing"].drop_nulls()
        if sw.len():
            v["gpu_util_swing"] = round(float(sw.mean()), 1)   # mean change between consecutive samples
    power = col("power_w")
    if power is not None:
        v["gpu_power_mean"] = round(float(power.mean()), 1)
        v["gpu_power_max"] = round(float(power.max()), 1)
        limit = v.get("gpu_power_limit_w")
        if limit:
            v["gpu_power_frac"] = round(v["gpu_power_mean"] / limit, 3)
    clk = col("sm_clock_mhz")
    if clk is not None:
        v["gpu_sm_clock_mean"] = round(float(clk.mean()))
        cmax = v.get("gpu_sm_clock_max_mhz")
        if cmax:
            v["gpu_sm_clock_frac"] = round(v["gpu_sm_clock_mean"] / cmax, 3)
    mem_util = col("mem_util")
    if mem_util is not None:
        # Memory-controller busy %: with SM % it tells a saturated GPU (both high) from one fed
        # tiny kernels by the host (SM busy, memory idle) when power cannot be judged.
        v["gpu_mem_util_mean"] = round(float(mem_util.mean()), 1)
    temp = col("temp_c")
    if temp is not None:
        v["gpu_temp_max"] = float(temp.max())
    thr = col("throttled")
    if thr is not None:
        v["gpu_throttled_share"] = round(float(thr.cast(pl.Float64).mean()), 3)
        reasons = Counter(r for row in ev.gpu_rows for r in (row.get("reasons") or []))
        v["gpu_throttle_reasons"] = ", ".join(f"{k} ({n}×)" for k, n in reasons.most_common()) or None
    mem = col("mem_used_mib")
    if mem is not None and v.get("gpu_memory_gib"):
        v["gpu_mem_used_frac"] = round(float(mem.mean()) / 1024 / v["gpu_memory_gib"], 3)
    return basis


@produces("gpu_memory_gib", "gpu_power_limit_w", "gpu_sm_clock_max_mhz", "gpus_reported",
          flags=("fp8_capable",), texts=("gpu_board", "gpu_name", "gpu_power_limit_source"))
def identity(ev: Evidence, v: dict) -> None:
    """The GPU's name, board, power limit, clocks and memory, from the samples or the board table."""
    names = Counter(i.get("name") for i in ev.gpu_info.values() if i.get("name"))
    name = names.most_common(1)[0][0] if names else v.get("gpu_name")
    if name and not v.get("gpu_name"):
        v["gpu_name"] = name
        ev.set_fact("gpu_name", name, text="(GPU samples)")
    board = lookup(v.get("gpu_name"))
    v["gpu_board"] = board["name"] if board else None
    limits = [i["power_limit_w"] for i in ev.gpu_info.values() if i.get("power_limit_w")]
    if limits:
        v["gpu_power_limit_w"] = max(limits)
        v["gpu_power_limit_source"] = "reported by the GPU"
    elif board:
        v["gpu_power_limit_w"] = board.get("sustained_power_w") or board.get("tdp_w")
        v["gpu_power_limit_source"] = f"board table ({board['name']}" + (", practical sustained power)" if board.get("sustained_power_w") else ", TDP)")
    clocks = [i["sm_clock_max_mhz"] for i in ev.gpu_info.values() if i.get("sm_clock_max_mhz")]
    if clocks:
        v["gpu_sm_clock_max_mhz"] = max(clocks)
    totals = [i["memory_total_mib"] for i in ev.gpu_info.values() if i.get("memory_total_mib")]
    if totals and not v.get("gpu_memory_gib"):
        v["gpu_memory_gib"] = round(max(totals) / 1024, 1)
        ev.set_fact("gpu_memory_gib", v["gpu_memory_gib"], text="(GPU samples: memory.total)")
    elif board and not v.get("gpu_memory_gib"):
        v["gpu_memory_gib"] = board.get("memory_gib")
    if board and v.get("fp8_capable") is None:
        v["fp8_capable"] = bool(board.get("fp8"))
    if ev.gpu_info and not v.get("gpu_count"):
        v["gpus_reported"] = len(ev.gpu_info)


@produces(flags=("topo_tp_cross_numa", "topo_tp_nvlink", "topo_tp_pcie", "tp_over_pcie"), texts=("topo_tp_cells",),
          source="GPU topology (nvidia-smi topo -m)")
def topology(ev: Evidence, v: dict) -> None:
    """How the tensor-parallel ranks are linked (`nvidia-smi topo -m`): PCIe, NVLink, across NUMA."""
    links = ev.topology.get("links")
    if not links:
        return
    gpus = ev.topology.get("gpus", [])
    tp = int(v.get("tensor_parallel_size") or 0)
    group = gpus[:tp] if tp > 1 else gpus
    cells = []
    for i, a in enumerate(group):
        for b in group[i + 1:]:
            c = links.get((a, b))
            if c:
                cells.append((a, b, c))
    if not cells:
        return
    v["topo_tp_cells"] = ", ".join(f"{a}↔{b} {c}" for a, b, c in cells)
    v["topo_tp_pcie"] = any(c in LINK_PCIE for _, _, c in cells)
    v["topo_tp_nvlink"] = all(c.startswith("NV") for _, _, c in cells)
    numa = ev.topology.get("numa", {})
    v["topo_tp_cross_numa"] = len({numa.get(g) for g in group if numa.get(g) not in (None, "N/A")}) > 1
    if v["topo_tp_pcie"] and tp > 1:       # the topology settles what the log's NCCL lines only hint
        v["tp_over_pcie"] = True
    for g in group:
        src = ev.topology.get("lines", {}).get(g)
        if src:
            ev.add_event("topo_row", src[0], src[1], src[2])

"""A disaggregated deployment as one system: its prefill and decode pools side by side (from each
node's own signals), for the rules of scope `disaggregated` (pd-ratio-imbalance)."""
from __future__ import annotations

from .producers import produces


@produces("decode_busy_share", "decode_nodes", "decode_running_cap", "decode_running_mean",
          "decode_waiting_mean", "kv_transfer_failure_count_all", "prefill_busy_share", "prefill_nodes",
          "prefill_running_cap", "prefill_running_mean", "prefill_waiting_mean", texts=("pd_ratio",))
def pd_signals(nodes: list) -> dict:
    """`nodes`: per-node Analysis objects, each with a `node_role` of prefill or decode."""
    pools = {"prefill": [a for a in nodes if a.signals.values.get("node_role") == "prefill"],
             "decode": [a for a in nodes if a.signals.values.get("node_role") == "decode"]}
    v: dict = {"prefill_nodes": len(pools["prefill"]), "decode_nodes": len(pools["decode"]),
               "pd_ratio": f"{len(pools['prefill'])}:{len(pools['decode'])}"}
    for role, members in pools.items():
        # A pool is judged only when each of its nodes has a steady window: one node without stats
        # makes the pool's load unknown, not lighter.
        vals = [a.signals.values for a in members]
        steady = all(x.get("running_mean") is not None and not x.get("too_few_samples") for x in vals)
        if not vals or not steady:
            continue
        v[f"{role}_running_mean"] = round(sum(x["running_mean"] for x in vals), 3)
        v[f"{role}_waiting_mean"] = round(sum(x.get("waiting_mean") or 0 for x in vals), 3)
        caps = [x.get("max_num_seqs") for x in vals]
        if all(isinstance(c, (int, float)) and c > 0 for c in caps):
            v[f"{role}_running_cap"] = sum(caps)
            # how full the pool runs against what it admits at once (max_num_seqs / max_running_requests)
            v[f"{role}_busy_share"] = round(v[f"{role}_running_mean"] / v[f"{role}_running_cap"], 3)
    v["kv_transfer_failure_count_all"] = sum(a.signals.values.get("kv_transfer_failure_count") or 0 for a in nodes)
    return v

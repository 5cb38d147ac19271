"""Write the SGLang DP-attention fixtures: one `Decode batch` line per DP rank every few seconds,
in the shape of real DP-attention logs (sgl-project/sglang PR #6081's server log; issue #38118:
eight ranks pinned one below a per-rank cap of 128 // 8 = 16 while requests queue).

    python tests/tools/make_dp_rank_fixtures.py
"""
from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RANKS = 8


def server_args(max_running: int) -> str:
    return ("[2026-07-06 19:02:11] server_args=ServerArgs(model_path='zai-org/GLM-5-FP8', tokenizer_mode='auto', "
            "trust_remote_code=True, context_length=None, dtype='auto', quantization=None, kv_cache_dtype='auto', "
            f"mem_fraction_static=0.85, max_running_requests={max_running}, chunked_prefill_size=4096, "
            "max_prefill_tokens=16384, schedule_policy='fcfs', schedule_conservativeness=0.3, page_size=64, "
            "tp_size=8, pp_size=1, dp_size=8, ep_size=8, enable_dp_attention=True, disable_cuda_graph=False, "
            "cuda_graph_max_bs=128, speculative_algorithm=None, disable_radix_cache=False, log_level='info')")


def startup(per_rank_cap: int) -> list[str]:
    out = []
    for r in range(RANKS):
        out.append(f"[2026-07-06 19:03:40 DP{r} TP{r} EP{r}] Load weight end. type=GlmMoeForCausalLM, dtype=torch.bfloat16, "
                   "avail mem=41.20 GB, mem usage=36.81 GB.")
    for r in range(RANKS):
        out.append(f"[2026-07-06 19:03:52 DP{r} TP{r} EP{r}] KV Cache is allocated. #tokens: 283712, KV size: 17.32 GB")
    for r in range(RANKS):
        out.append(f"[2026-07-06 19:04:30 DP{r} TP{r} EP{r}] max_total_num_tokens=283712, chunked_prefill_size=4096, "
                   f"max_prefill_tokens=16384, max_running_requests={per_rank_cap}, context_len=131072, "
                   "available_gpu_mem=9.87 GB")
    out.append("[2026-07-06 19:04:33] INFO:     Application startup complete.")
    out.append("[2026-07-06 19:04:34] The server is fired up and ready to roll!")
    return out


def decode_lines(running: int, queue, accept: float | None, ticks: int = 30) -> list[str]:
    """Three decode lines per rank per 10 s stats interval (SGLang logs every N decode steps)."""
    t0 = datetime(2026, 7, 6, 19, 10, 0)
    out = []
    for step in range(ticks * 3):
        t = t0 + timedelta(seconds=step * 10 / 3)
        for r in range(RANKS):
            tokens = 41000 + 37 * ((step * 7 + r * 13) % 50)
            spec = f"accept len: {accept + 0.01 * ((step + r) % 9):.2f}, " if accept else ""
            gen = 18.5 * running * (accept or 1.0) + (step + r) % 7
            out.append(f"[{t:%Y-%m-%d %H:%M:%S} DP{r} TP{r} EP{r}] Decode batch, #running-req: {running}, "
                       f"#token: {tokens}, token usage: {tokens / 283712:.2f}, {spec}cuda graph: True, "
                       f"gen throughput (token/s): {gen:.2f}, #queue-req: {queue(step, r)}, ")
    return out


def write(path: str, lines: list[str]) -> None:
    (ROOT / path).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    # Every rank at 15 of its 16 slots while one to three requests wait on it.
    write("fixtures/rules/concurrency-cap/fires-dp-ranks.log",
          [server_args(128)] + startup(16) + decode_lines(15, lambda s, r: 1 + (s + r) % 3, None))
    # Same ranks, a per-rank cap far above and nothing queued: no cap, no batch of 8 × 15.
    write("fixtures/rules/concurrency-cap/quiet-dp-ranks.log",
          [server_args(2048)] + startup(256) + decode_lines(15, lambda s, r: 0, None))
    # MTP drafts at 8 requests per rank (64 in all): a small batch, where drafts pay.
    write("fixtures/rules/spec-decode-low-acceptance/quiet-dp-ranks.log",
          [server_args(2048).replace("speculative_algorithm=None", "speculative_algorithm='EAGLE'")]
          + startup(256) + decode_lines(8, lambda s, r: 0, 2.9))

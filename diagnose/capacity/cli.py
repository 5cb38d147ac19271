"""`diagnose capacity`: KV cache, weights, concurrency and roofline bounds for one deployment.

Exit codes: 0 computed (warnings included, e.g. the model does not fit), 2 usage or input error."""
from __future__ import annotations

import json
import sys
from enum import Enum
from typing import Optional

import typer

from .arithmetic import GIB, CapacityError, capacity
from .models import ModelError, resolve


class Format(str, Enum):
    terminal = "terminal"
    json = "json"


class Link(str, Enum):
    nvlink = "nvlink"
    pcie = "pcie"
    ib = "ib"
    tcp = "tcp"


def _die(msg: str) -> None:
    from ..values import printable
    sys.stderr.write(f"diagnose: {printable(msg)}\n")       # a name from the user: no escape sequence
    raise typer.Exit(2)


capacity_app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                           context_settings={"help_option_names": ["-h", "--help"]})


@capacity_app.command(help="KV cache per token and per sequence, how many sequences fit, weights per GPU, "
                           "the recommended concurrency and upper bounds on decode / prefill speed for one "
                           "deployment: is it the config, or the hardware's limit?")
def capacity_cmd(
    model: Optional[str] = typer.Option(None, "--model", metavar="MODEL", help="model name or HF id from the built-in table, "
                                                             "e.g. meta-llama/Llama-3.3-70B-Instruct"),
    model_config: Optional[str] = typer.Option(None, "--model-config", metavar="FILE", help="a Hugging Face config.json"),
    gpu: Optional[str] = typer.Option(None, "--gpu", metavar="GPU", help="GPU name, e.g. H100, A100 80GB, L40S, GB10"),
    tp: int = typer.Option(1, "--tp", metavar="N", help="tensor-parallel size"),
    pp: int = typer.Option(1, "--pp", metavar="N", help="pipeline-parallel size"),
    dp: int = typer.Option(1, "--dp", metavar="N", help="data-parallel replicas"),
    context: Optional[int] = typer.Option(None, "--context", metavar="TOKENS", help="tokens per sequence (prompt + output)"),
    kv_dtype: str = typer.Option("auto", "--kv-dtype", metavar="DTYPE", help="auto, fp32, fp16, bf16, fp8"),
    weight_dtype: Optional[str] = typer.Option(None, "--weight-dtype", metavar="DTYPE",
                                               help="bf16, fp16, fp8, int8, int4, fp4, mxfp4 (default: the checkpoint's)"),
    gpu_memory_utilization: float = typer.Option(0.9, "--gpu-memory-utilization", metavar="FRACTION",
                                                 help="share of GPU memory the engine may use"),
    kv_memory: Optional[float] = typer.Option(None, "--kv-memory", metavar="GIB",
                                              help="KV budget per GPU in GiB, instead of deriving it"),
    link: Optional[Link] = typer.Option(None, "--link", help="link between TP ranks: nvlink, pcie, ib, tcp "
                                                            "(default: nvlink when the GPU has it, else pcie)"),
    format: Format = typer.Option(Format.terminal, "--format", "-f", help="terminal or json"),
) -> None:
    if not model and not model_config:
        _die("capacity: give --model NAME or --model-config config.json")
    if not gpu and kv_memory is None:
        _die("capacity: give --gpu NAME (e.g. H100, A100 80GB, GB10), or --kv-memory GIB for the KV arithmetic alone")
    if context is None:
        _die("capacity: give --context TOKENS (e.g. --context 40000)")
    try:
        facts = resolve(name=model, config=model_config)
        result = capacity(facts, gpu, tp=tp, pp=pp, dp=dp, context=context, kv_dtype=kv_dtype,
                          weight_dtype=weight_dtype, gpu_memory_utilization=gpu_memory_utilization,
                          kv_memory_gib=kv_memory, link=link.value if link else None)
    except (ModelError, CapacityError) as e:
        _die(str(e))
    if format is Format.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        return
    _render(facts, gpu, tp, pp, dp, context, result)


def _bytes(n) -> str:
    if n is None:
        return "unknown"
    if n < 1024 * 1024:
        return f"{n:,.0f} B ({n / 1024:.4g} KiB)"
    if n < GIB:
        return f"{n / 1e6:.3g} MB ({n / 2 ** 20:.3g} MiB)"
    return f"{n / 1e9:.3g} GB ({n / GIB:.3g} GiB)"


def _render(facts, gpu_name, tp, pp, dp, context, r) -> None:
    from rich.console import Console
    from rich.table import Table

    from diagnose.capacity.boards import lookup as board_lookup

    board = (board_lookup(gpu_name) if gpu_name else None) or {}
    c = Console(highlight=False, emoji=False, soft_wrap=True)
    n_gpus = tp * pp * dp
    c.print(f"Capacity: {facts.name} on {n_gpus} x {board.get('name', gpu_name or 'GPU (not named)')} "
            f"(TP={tp}, PP={pp}, DP={dp}), context {context:,} tokens")
    c.print(f"model facts: {facts.source}")
    t = Table(show_header=True, header_style="bold")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    dec = r["decode_tokens_per_s_per_sequence_bound"]
    pre = r["prefill_tokens_per_s_bound"]
    stable, explore = r["optimal_concurrency"]
    rows = [
        ("weights per GPU", _bytes(r["weights_bytes_per_gpu"])),
        ("KV per token per layer (whole model)", _bytes(r["kv_bytes_per_token_per_layer"])),
        ("KV per token per GPU", _bytes(r["kv_bytes_per_token_per_gpu"])),
        (f"KV per {context:,}-token sequence per GPU", _bytes(r["kv_bytes_per_sequence_per_gpu"])),
        ("max sequences (memory bound, per replica)", f"{r['max_sequences']:g}"),
        ("optimal concurrency (stable - exploratory)", f"{stable} - {explore}"),
        ("decode bound, one sequence", f"{dec:.3g} tok/s" if dec is not None else "unknown"),
        ("prefill bound", f"{pre:,.0f} tok/s" if pre is not None else "unknown"),
        ("fits", "unknown" if r["fits"] is None else "yes" if r["fits"] else "NO"),
    ]
    if not gpu_name:        # the KV arithmetic alone
        rows = [x for x in rows if not x[0].startswith(("decode bound", "prefill bound"))]
    for k, v in rows:
        t.add_row(k, v)
    c.print(t)
    for w in r["warnings"]:
        c.print(f"warning: {w}")
    c.print("assumptions:")
    for a in r["assumptions"]:
        c.print(f"  - {a}")
    for n in facts.notes:
        c.print(f"  - model: {n}")


if __name__ == "__main__":
    capacity_app()

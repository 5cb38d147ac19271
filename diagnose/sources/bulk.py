"""The bulk path for big plain log files: polars' streaming CSV reader splits lines in Rust, its
Aho-Corasick matcher finds keyword lines, and the access and request lines that make up ~98 % of a
busy server's log are aggregated in Rust instead of being parsed one by one in Python.

It replaces only the scanner's inner loop: every line that needs a parser still goes through the
same parsers, in order, with its line number. Evidence equals the block scanner's (a test holds
them to it); small files, gzip and stdin keep the block scanner.
"""
from __future__ import annotations

import os
import re

from ..evidence.model import EVENT_KEEP, Event, Evidence
from ..redact import redact
from .common_lines import MAX_PREFIXES, PROBE_PATHS
from .scanner import GREP_KEYWORDS

FAST_MIN_BYTES = int(os.environ.get("DIAGNOSE_BULK_MIN_BYTES", 64 * 1024 * 1024))
SEP = "\x1f"      # a byte that never appears in logs: each line is one CSV field
ACCESS = r'INFO: +[\w.:\[\]-]+:\d+ - "[A-Z]+ \S+ HTTP/[\d.]+" \d{3}'
REQUEST = r"\] (?:Received|Added|Finished|Aborted) request"


def usable(path: str, head: bytes) -> bool:
    try:
        size = os.path.getsize(path)
    except OSError:
        return False
    return size >= FAST_MIN_BYTES and head[:2] != b"\x1f\x8b" and b"\x00" not in head[:65536]


BLOCK = 4 * 1024 * 1024     # bounded memory: one block of lines in Rust at a time


def scan_bulk(path: str, display: str, ev: Evidence, counts, when_of, progress=None):
    """Yield (line number, text) for the lines parsers must see; aggregate the rest into `ev`."""
    import io
    import polars as pl
    kws = [k for k in GREP_KEYWORDS if k not in ("HTTP/1", "request")]
    l = pl.col("l").fill_null("")
    bad = l.str.contains("\ufffd", literal=True)
    acc = l.str.contains(ACCESS)
    req = l.str.contains(REQUEST)
    status = l.str.extract(r'HTTP/[\d.]+" (\d{3})')
    path_ = l.str.extract(r'"[A-Z]+ (\S+) HTTP/')
    probe = acc & pl.any_horizontal([path_.str.starts_with(p) for p in PROBE_PATHS])
    received = l.str.contains("] Received request", literal=True)
    # The prompt's head, cut exactly as common_lines.note_prompt cuts it, hashed per distinct head.
    at = l.str.find("prompt: ", literal=True)
    body = l.str.slice(at + 9, 300)
    quote = l.str.slice(at + 8, 1)
    head = pl.when(quote == "'").then(body.str.split("', params").list.first().str.split("', sampling_params").list.first()) \
        .otherwise(body.str.split('", params').list.first().str.split('", sampling_params').list.first()) \
        .str.slice(0, 256)
    base = 0
    recognised = 0
    with open(path, "rb") as fh:
        carry = b""
        while True:
            chunk = fh.read(BLOCK)
            if progress is not None:
                progress(len(chunk))
            if not chunk and not carry:
                break
            buf = carry + chunk
            cut = buf.rfind(b"\n") if chunk else len(buf) - 1
            if cut < 0:
                carry = buf
                continue
            block, carry = buf[: cut + 1], buf[cut + 1:]
            df = pl.read_csv(io.BytesIO(block), has_header=False, separator=SEP, quote_char=None, new_columns=["l"],
                             infer_schema=False, truncate_ragged_lines=True, encoding="utf8-lossy",
                             raise_if_empty=False)
            if not df.height:
                base += block.count(b"\n")
                continue
            df = df.with_row_index("n", offset=base + 1).with_columns(bad=bad)
            base += df.height
            counts.lines += df.height
            counts.unreadable += int(df["bad"].sum())
            ok = df.filter(~pl.col("bad"))
            # Cheap literal tests first; the exact patterns only on the rows that pass them.
            a = ok.filter(l.str.contains("HTTP/", literal=True)).filter(acc) \
                .with_columns(status=status, probe=probe)
            recognised += a.height
            if a.height:
                ev.count("access_lines", a.height)
                for code, n in a.group_by("status").len().iter_rows():
                    if code:
                        ev.count(f"status_{code}", int(n))
                pb = a.filter(pl.col("probe"))
                if pb.height:
                    ev.count("access_probe_lines", pb.height)
                    _examples(ev, "access_probe", display, pb, pb.height)
                for code, part in a.filter(pl.col("status").str.starts_with("5") | (pl.col("status") == "429")) \
                        .partition_by("status", as_dict=True).items():
                    _examples(ev, f"http_{code[0]}", display, part, part.height)
            r = ok.filter(l.str.contains(" request", literal=True)).filter(req).with_columns(received=received)
            recognised += r.height
            if r.height:
                ev.count("request_lines", r.height)
                rc = r.filter(pl.col("received"))
                if rc.height:
                    _examples(ev, "request", display, rc, rc.height)
                    hs = rc.filter(quote.is_in(["'", '"'])).select(head.alias("h")).drop_nulls().group_by("h").len()
                    for h, n in hs.iter_rows():
                        k = hash(h)
                        ev.prompt_prefixes[k] = ev.prompt_prefixes.get(k, 0) + int(n)
            taken = pl.concat([a["n"], r["n"]])
            rest = ok.filter(~pl.col("n").is_in(taken.implode())).filter(l.str.contains_any(kws))
            for n, text in rest.select("n", "l").iter_rows():
                yield n, text
    counts.bulk_recognised = recognised


def _examples(ev: Evidence, kind: str, display: str, frame, total: int) -> None:
    """Count every line of a kind; keep the first EVENT_KEEP as evidence (redacted)."""
    ev.event_counts[kind] = ev.event_counts.get(kind, 0) + total
    bucket = ev.events.setdefault(kind, [])
    room = EVENT_KEEP - len(bucket)
    if room > 0:
        for n, text in frame.select("n", "l").head(room).iter_rows():
            bucket.append(Event(kind, display, n, redact(_strip(text)), None, {}))


def _status(raw: str) -> str:
    m = re.search(r'HTTP/[\d.]+" (\d{3})', raw)
    return m.group(1) if m else "000"


ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _strip(text: str) -> str:
    return ANSI.sub("", text).rstrip("\r\n ") if "\x1b" in text else text.rstrip("\r\n ")

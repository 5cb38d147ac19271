"""A bare `/metrics` endpoint sampled over time (`diagnose --scrape URL --for 60s`): each scrape's
samples are stamped with the time it was taken and written as Prometheus text, so the rates come
from the saved samples exactly as from any saved scrape file (one derivation, one set of numbers);
`--save FILE` keeps them. With `--watch` (`Sampler`) one scrape is added before each pass and the
file keeps only the last `--since` of them."""
from __future__ import annotations

import os
import time
from collections import deque
from datetime import datetime, timezone

from .prometheus import MAX_ANSWER_BYTES, METRIC_LINE, AnswerTooBig, BoundedSession, OutOfTime, PromError, _request_error

MAX_SCRAPES = 10_000


def is_metrics_url(url: str) -> bool:
    """A URL that names an exporter's page, not a Prometheus server."""
    return url.split("?", 1)[0].rstrip("/").endswith("/metrics")


def _stamped(text: str, ms: int, first: bool) -> list[str]:
    """The scrape's sample lines with its time appended (a sample that carries its own keeps it);
    HELP/TYPE only from the first scrape; `# EOF` dropped (it would mark seconds, not ms)."""
    out = []
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            if first and s.startswith(("# HELP ", "# TYPE ")):
                out.append(s)
            continue
        m = METRIC_LINE.match(s)
        if m:
            out.append(s if m.group("ts") else f"{s} {ms}")
    return out


def sample(url: str, seconds: float, every: float, path: str, timeout: float = 10.0, say=None) -> int:
    """GET `url` every `every` seconds for `seconds` seconds (each request within `timeout`, all of
    them within the sampling time plus one timeout), appending each scrape to `path`. Returns the
    scrapes taken. Raises PromError (one line) when the first scrape fails or is no /metrics page."""
    session = BoundedSession(timeout, seconds + 2 * timeout)
    end = time.monotonic() + seconds
    taken = 0
    with open(path, "w", encoding="utf-8") as fh:
        while taken < MAX_SCRAPES:
            t0 = time.monotonic()
            try:
                r = session.request("GET", url, headers={"Accept": "text/plain;version=0.0.4"})
                if r.status_code != 200:
                    raise PromError(f"{url}: HTTP {r.status_code} from the /metrics endpoint")
                text = r.content[:MAX_ANSWER_BYTES].decode("utf-8", "replace")
            except PromError:
                if not taken:
                    raise
                break
            except (AnswerTooBig, OutOfTime, OSError, ValueError) as e:
                if not taken:
                    raise _request_error(e, url, timeout) from None
                break                    # a later failure ends the sampling; what was taken stands
            except Exception as e:       # requests' own errors (ConnectionError, …)
                if not taken:
                    raise _request_error(e, url, timeout) from None
                break
            ms = int(datetime.now(timezone.utc).timestamp() * 1000)
            lines = _stamped(text, ms, taken == 0)
            if not taken and not any(not ln.startswith("#") for ln in lines):
                raise PromError(f"{url}: no metric samples in the answer (is it a /metrics page?)")
            fh.write("\n".join(lines) + "\n")
            fh.flush()
            taken += 1
            if say:
                say(taken)
            left = end - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, max(0.0, every - (time.monotonic() - t0))))
    return taken


class Sampler:
    """`--scrape URL --watch 10s`: one scrape per pass (`take`), stamped with its time; the file at
    `path` is rewritten with the scrapes of the last `keep_s` seconds, so the file, and what each
    pass reads, stay bounded however long the watch runs."""

    def __init__(self, url: str, path: str, keep_s: float, timeout: float = 10.0) -> None:
        self.url, self.path, self.keep_s, self.timeout = url, path, keep_s, timeout
        self.head: list[str] = []           # HELP/TYPE of the first scrape
        self.scrapes: deque = deque()       # (epoch s, sample lines)
        self.taken = 0

    def take(self) -> None:
        """One scrape, within `timeout`. Raises PromError (one line) when it fails."""
        session = BoundedSession(self.timeout, self.timeout)
        try:
            r = session.request("GET", self.url, headers={"Accept": "text/plain;version=0.0.4"})
        except Exception as e:           # requests' own errors, AnswerTooBig, OutOfTime
            raise _request_error(e, self.url, self.timeout) from None
        if r.status_code != 200:
            raise PromError(f"{self.url}: HTTP {r.status_code} from the /metrics endpoint")
        now = datetime.now(timezone.utc).timestamp()
        lines = _stamped(r.content[:MAX_ANSWER_BYTES].decode("utf-8", "replace"), int(now * 1000), True)
        body = [ln for ln in lines if not ln.startswith("#")]
        if not body:
            raise PromError(f"{self.url}: no metric samples in the answer (is it a /metrics page?)")
        if not self.head:
            self.head = [ln for ln in lines if ln.startswith("#")]
        self.scrapes.append((now, body))
        while self.scrapes and self.scrapes[0][0] < now - self.keep_s:
            self.scrapes.popleft()
        self.taken += 1
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:     # a pass never reads a half-written file
            fh.write("\n".join(self.head) + "\n")
            for _, body in self.scrapes:
                fh.write("\n".join(body) + "\n")
        os.replace(tmp, self.path)

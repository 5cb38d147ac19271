"""Command line: `diagnose FILE…` and `diagnose rules [ID]`.

Exit codes (EXIT_CODES, listed in `--help` and the README): 0 diagnosed, 1 a finding at or above
--fail-on, 2 usage or input error, 3 internal error, 130 / 143 stopped by SIGINT / SIGTERM before a
report. Every line on stderr passes `printable`: no control character from a file name or a log
line reaches the terminal.
"""
# No `from __future__ import annotations` here: typer reads the commands' signatures on every run,
# and string annotations are evaluated there one by one (~4 ms for `analyze`'s forty options).
import os
import signal
import sys


def _early_interrupt(signum, frame) -> None:
    """SIGINT/SIGTERM while the command is still starting (importing typer and the rest: nothing
    read, nothing written yet): the one line and the exit code, never a traceback."""
    os.write(2, b"diagnose: interrupted\n")
    os._exit(128 + signum)


# Run as the program (`python -m diagnose`, the `diagnose` script), not imported by another one:
# a signal from now on ends the run cleanly; main() installs the handlers of the run itself.
_AS_PROGRAM = bool(sys.argv) and (
    os.path.abspath(sys.argv[0]) == os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")
    or os.path.basename(sys.argv[0]) == "diagnose")
if _AS_PROGRAM:
    for _sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(_sig, _early_interrupt)

# After the handlers: importing these (typer above all) is most of the start-up. As the program,
# without the cycle collector: the imports create objects it would walk ~30 times over and free
# none of (main() puts it back; an analysis then goes without it, see _main).
import gc  # noqa: E402
_GC_PAUSED = _AS_PROGRAM and gc.isenabled()
if _GC_PAUSED:
    gc.disable()
if _AS_PROGRAM:      # patterns compiled by an earlier run are not compiled again (recache.py)
    from .recache import install
    install()
    # A big log among the arguments: the C reader starts on it now, on the other cores, while the
    # rest is imported (sources/readers/early.py; the run takes it over or stops it).
    from .sources.readers import early as _early
    _early.start(sys.argv[1:])
from enum import Enum  # noqa: E402
from typing import List, Optional  # noqa: E402

import typer  # noqa: E402

from . import __version__

from .values import SEVERITIES


class Format(str, Enum):
    terminal = "terminal"
    markdown = "markdown"
    jira = "jira"
    json = "json"
    sarif = "sarif"
    junit = "junit"
    html = "html"


class FailOn(str, Enum):
    critical = "critical"
    high = "high"
    medium = "medium"
    low = "low"
    info = "info"
    none = "none"


def _say(msg: str) -> None:
    """One line on stderr, `diagnose: …`, whatever the message holds (a file name with an escape
    sequence or a line break is shown escaped, on one line)."""
    from .reports.common import printable
    sys.stderr.write(f"diagnose: {printable(msg)}\n")


def _die(msg: str) -> None:
    _say(msg)
    raise typer.Exit(2)


# `-h` as well as `--help`, for the main command and every subcommand.
HELP = {"help_option_names": ["-h", "--help"]}

# Every exit status, as the main help lists them (and the README's table).
EXIT_CODES = {
    0: "diagnosed: no finding at or above --fail-on",
    1: "a finding at or above --fail-on (or a regression under --fail-on-regression)",
    2: "usage or input error (one line on stderr)",
    3: "internal error (a bug: please report it with the input)",
    130: "stopped by SIGINT (Ctrl-C) before a report: `diagnose: interrupted`",
    143: "stopped by SIGTERM before a report",
}

# The subcommands, dispatched by _main before typer sees the arguments (each is its own app: the
# main command keeps its FILES... argument, and a run loads only what it needs). Listed in the main
# help ("\b": click keeps the lines as they are).
COMMANDS_EPILOG = """\b
Commands:
  rules [RULE_ID]  list every rule, or print one rule's documentation
  gpu --live       sample this machine's GPUs through NVML and diagnose them
  gpu FILE...      captured GPU samples (nvidia-smi dmon, --query-gpu CSV, topo -m):
                   the same as `diagnose FILE...`
  capacity         KV cache, concurrency and speed bounds for one deployment
                   (--model MODEL --gpu GPU --context TOKENS)
  schema           the JSON Schema of --format json

Run `diagnose COMMAND -h` for a command's options.

\b
Exit codes:
""" + "\n".join(f"  {code:<4} {what}" for code, what in EXIT_CODES.items()) + """
  With --follow/--watch a first SIGINT/SIGTERM prints the final report (exit 0 or 1);
  130/143 only when no pass had finished."""


def _version(value: bool) -> None:
    if value:
        print(f"diagnose {__version__}")
        raise typer.Exit()


analyze_app = typer.Typer(add_completion=True, rich_markup_mode=None, pretty_exceptions_enable=False,
                          context_settings=HELP)


@analyze_app.command(help="Diagnose vLLM, SGLang and TensorRT-LLM logs, GPU samples and metrics files: ranked "
                          "findings, evidence, and the flags to change. FILES: files, directories, globs, .gz, or - for stdin.",
                     epilog=COMMANDS_EPILOG)
def analyze(
    files: List[str] = typer.Argument(None, metavar="FILES...", show_default=False,
                                      help="log, GPU-sample, metrics or targets files; directories, globs, .gz, or - for stdin"),
    format: Format = typer.Option(Format.terminal, "--format", "-f", help="terminal, markdown, jira, json, sarif, junit or html"),
    fail_on: FailOn = typer.Option(FailOn.none, "--fail-on", help="exit 1 when a finding is at or above this severity"),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help="with --baseline: exit 1 when a key signal got worse beyond its noise band"),
    baseline: List[str] = typer.Option([], "--baseline", metavar="FILE", help="the run to compare with: a log (repeatable) or a saved JSON report"),
    baseline_window: Optional[str] = typer.Option(None, "--baseline-window", metavar="DURATION|START,END", help="with --prometheus: the earlier window to compare with, START,END (ISO times) or a duration back from --start, e.g. 1d"),
    ignore: List[str] = typer.Option([], "--ignore", metavar="RULE_ID[,...]", help="rule ids to suppress (comma-separated or repeated)"),
    rules: List[str] = typer.Option([], "--rules", metavar="DIR", help="a directory of extra rule files (repeatable)"),
    config: Optional[str] = typer.Option(None, "--config", metavar="FILE", help="project config (default: ./.diagnose.toml when present)"),
    output: Optional[str] = typer.Option(None, "--output", "-o", metavar="FILE", help="write the report to this file"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="list rules that were not applicable"),
    no_redact: bool = typer.Option(False, "--no-redact", help="show prompts and user text from request logs"),
    year: Optional[int] = typer.Option(None, "--year", metavar="YYYY", help="year of the first timestamp (logs omit it)"),
    gpu_start: Optional[str] = typer.Option(None, "--gpu-start", metavar="TIME", help="when a dmon capture without -o DT started, e.g. '2025-11-14 09:51:38'"),
    gpu_interval: float = typer.Option(1.0, "--gpu-interval", metavar="SECONDS", help="sampling interval of such a capture, seconds"),
    gpu_name: Optional[str] = typer.Option(None, "--gpu-name", metavar="GPU", help="GPU model, for samples that do not name it (dmon), e.g. 'H100 SXM'"),
    targets: Optional[str] = typer.Option(None, "--targets", metavar="FILE", help="SLO targets (TOML or YAML) per deployment or GPU SKU"),
    prometheus: Optional[str] = typer.Option(None, "--prometheus", metavar="URL", help="diagnose from a live Prometheus at this URL"),
    since: str = typer.Option("30m", "--since", metavar="DURATION", help="with --prometheus: how far back (e.g. 30m, 2h, 1d)"),
    start_t: Optional[str] = typer.Option(None, "--start", metavar="TIME", help="with --prometheus: window start (ISO time); with --end instead of --since"),
    end_t: Optional[str] = typer.Option(None, "--end", metavar="TIME", help="with --prometheus: window end (ISO time)"),
    step: str = typer.Option("15s", "--step", metavar="DURATION", help="with --prometheus: resolution of range queries"),
    match: str = typer.Option("", "--match", metavar="MATCHERS", help="with --prometheus: label matchers, e.g. '{namespace=\"prod\"}'"),
    model: Optional[str] = typer.Option(None, "--model", metavar="MODEL", help="with --prometheus: only this model_name"),
    token_file: Optional[str] = typer.Option(None, "--prometheus-token-file", metavar="FILE", help="bearer token for --prometheus, read from this file"),
    user: Optional[str] = typer.Option(None, "--prometheus-user", metavar="USER", help="basic-auth user (password from DIAGNOSE_PROMETHEUS_PASSWORD)"),
    insecure: bool = typer.Option(False, "--insecure", help="do not verify the Prometheus TLS certificate"),
    timeout: float = typer.Option(30.0, "--timeout", metavar="SECONDS", help="the most one Prometheus request may take, its answer read to the end"),
    deadline: Optional[float] = typer.Option(None, "--deadline", metavar="SECONDS", help="the most all of a pass's Prometheus queries may take together (default: 4 × --timeout)"),
    partial: bool = typer.Option(False, "--partial", help="report what was fetched when Prometheus fails part-way"),
    follow: bool = typer.Option(False, "--follow", help="keep reading the files as they grow (tail -F) and show the diagnosis again every --interval; Ctrl-C for the final report"),
    watch: Optional[str] = typer.Option(None, "--watch", metavar="DURATION", help="with --prometheus: query again every DURATION (e.g. 30s) over the last --since; with --scrape: one scrape every DURATION, the diagnosis over the last --since; Ctrl-C for the final report"),
    interval: str = typer.Option("5s", "--interval", metavar="DURATION", help="with --follow: how often to look again (e.g. 5s); with --scrape: how often to sample"),
    scrape: Optional[str] = typer.Option(None, "--scrape", metavar="URL", help="sample a bare /metrics endpoint (an engine's own) every --interval for --for, and diagnose the rates"),
    scrape_for: str = typer.Option("60s", "--for", metavar="DURATION", help="with --scrape: how long to sample (e.g. 60s)"),
    save: Optional[str] = typer.Option(None, "--save", metavar="FILE", help="with --scrape: keep the samples in FILE (Prometheus text with times; diagnose reads it back)"),
    utc: bool = typer.Option(False, "--utc", help="show the times of metric samples (Prometheus, scrapes) in UTC; default: the local zone, named in the report"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="print no report: only errors, and the exit code says the rest (with -o the file is still written)"),
    version: bool = typer.Option(False, "--version", "-V", is_eager=True, callback=_version,
                                 help="print the version and exit"),
) -> None:
    from . import redact
    from .config import ConfigError, load_config

    redact.ENABLED = not no_redact
    from . import clock
    clock.USE_UTC = utc
    _BASELINE_RUN.clear()           # one command, one baseline (the CLI may run in-process more than once)
    try:
        cfg = load_config(config)
    except ConfigError as e:
        _die(str(e))
    cli_ignored = {x.strip() for item in ignore for x in item.split(",") if x.strip()}
    ignored = cli_ignored | cfg.active_ignores()
    start = None
    if gpu_start:
        from datetime import datetime
        try:
            start = datetime.fromisoformat(gpu_start)
        except ValueError:
            _die(f"--gpu-start: not a date and time: {gpu_start!r} (e.g. 2025-11-14 09:51:38)")
    files = files or []
    if prometheus and not scrape:
        from .sources.scrape import is_metrics_url
        if is_metrics_url(prometheus):         # an exporter's page, not a Prometheus server: sample it
            scrape, prometheus = prometheus, None
    sampler = None
    if scrape:
        if follow:
            _die("--scrape samples an endpoint: not with --follow (--watch DURATION samples it and refreshes the diagnosis)")
        if watch:
            sampler = _scrape_watch(scrape, watch, since, save, timeout)
            files = list(files) + [sampler.path]
        else:
            files = list(files) + [_scrape(scrape, scrape_for, interval, save, timeout)]
    if not files and not prometheus:
        _die("no input given (pass log files, a directory, a glob, - for stdin, or --prometheus URL)")
    tgt = dict(cfg.targets)
    if targets:
        from .targets import TargetsError, load_targets
        try:
            tgt.update(load_targets(targets))
        except TargetsError as e:
            _die(str(e))
    prom = None
    if prometheus:
        prom = _prometheus_args(prometheus, since, start_t, end_t, step, match, model, token_file, user,
                                insecure, timeout, partial, deadline)
    stop = None
    if quiet and (follow or watch):
        _die("--quiet shows nothing: not with --follow/--watch")
    if follow or watch:
        every, window = _live_options(files, prom or sampler, follow, watch, interval, since, format, output)
        # From here a signal asks for the final report (live.Stop): the first pass below is the
        # loop's first, and a signal during it lets it finish.
        import time
        from .live import _stamp, begin
        stop = begin()
        # What start-up made lives as long as the loop: out of the collections after each pass
        # (live.run), which then walk only what the passes made.
        gc.freeze()
        if follow and files:
            from .live import wait_for_files
            if not wait_for_files(files, every, stop):
                raise typer.Exit(128 + stop.signum)       # stopped before any pass: 130 / 143
            # each followed file read once, then what is appended to it (sources/following.py)
            from .sources import following, loading
            loading.FOLLOWING = following.Following()
        stamp0 = _stamp(files) if files else None
        cpu0, wall0 = time.process_time(), time.monotonic()
        stop.busy = True
    if output:
        clash = _input_named(output, files, baseline, [targets, config])
        if clash:
            _die(f"-o {output}: is one of the inputs; not overwritten")
    kw = dict(rule_dirs=rules, ignore=ignored, year=year, gpu_start=start, gpu_interval=gpu_interval,
              gpu_name=gpu_name, overrides=cfg.rules, targets=tgt or None)
    # Imported once the options are known good: a usage error costs no reader, rule or report.
    from .ruleset.rules import RuleError
    from .pipeline import analyze_all, combined_json
    from .sources import InputError
    from .sources.prometheus import PromError
    try:
        analyses = analyze_all(files, prometheus=prom, **kw)
        before = _baseline(baseline, kw) if baseline else None
    except (InputError, RuleError, PromError) as e:
        _die(str(e))
    finally:
        if stop is not None:
            stop.busy = False
    all_rules = analyses[0].rules
    from .ruleset.rules import RETIRED_IDS
    known = {r.id for r in all_rules} | set(RETIRED_IDS)
    unknown = sorted(cli_ignored - known)
    if unknown:
        _die(f"--ignore: unknown rule id(s): {', '.join(unknown)} (see `diagnose rules`)")
    from .config import check_rule_ids
    bad = check_rule_ids(cfg, all_rules, RETIRED_IDS)
    if bad:
        _die(bad)
    if baseline_window:
        if not prom:
            _die("--baseline-window needs --prometheus")
        before = _baseline_window(baseline_window, prom, kw)
    if fail_on_regression and not (baseline or baseline_window):
        _die("--fail-on-regression needs --baseline or --baseline-window")
    if follow or watch:
        first = (analyses, stamp0, time.process_time() - cpu0, time.monotonic() - wall0)
        return _live(files, prom, kw, every, window, format, fail_on, verbose, stop, first, sampler)
    parts = [(a.to_json(), a.signals.timeline) for a in analyses]
    comparison = None
    if before is not None:
        from .findings.compare import compare
        comparison = compare(before, parts[0][0])
    suppressions = cfg.ignores
    for d, _ in parts:
        d["suppressions"] = suppressions
    from .reports import RENDERERS, ReportRun
    renderer = RENDERERS.get(format.value)          # the terminal view has no entry: it prints
    text = renderer(ReportRun(analyses=analyses, parts=parts, doc=combined_json(analyses), rules=all_rules,
                              comparison=comparison, suppressions=suppressions,
                              before=_BASELINE_RUN[0] if _BASELINE_RUN else None)) if renderer else None
    if text is not None:
        text = _report_text(text, format)
    if output:
        _write_atomic(output, text if text is not None else "".join(_terminal_text(d, t, verbose, comparison) for d, t in parts))
        if not quiet:
            print(_written_line(output, parts))
    elif quiet:
        pass
    elif text is not None:
        sys.stdout.write(text)
    else:
        from .reports.terminal import render as term, render_comparison
        from rich.markup import escape
        from .reports.common import deployment_label, printable, skipped_lines
        console = stdout_console()
        for line in skipped_lines(doc_skipped(analyses)):
            console.print(f"[dim]{escape(printable(line))}[/dim]")
        if len(parts) > 1:
            _overview(console, parts)
        for i, (d, t) in enumerate(parts):
            if len(parts) > 1:
                head = escape(printable(f"deployment {i + 1} of {len(parts)}: {deployment_label(d)}"))
                console.rule(head) if console.is_terminal or os.environ.get("COLUMNS") else console.print(f"── {head} ──")
            term(d, console, t, verbose)
        if comparison is not None:
            render_comparison(comparison, console)
    code = 0
    if fail_on is not FailOn.none:
        limit = SEVERITIES.index(fail_on.value)
        if any(SEVERITIES.index(f["severity"]) <= limit for d, _ in parts for f in d["findings"]):
            code = 1
    if fail_on_regression and comparison and any(s["verdict"] == "worse" for s in comparison["signals"].values()):
        code = 1
    if code:
        raise typer.Exit(code)


def stdout_console():
    """The terminal report's console: the terminal's width; on a pipe or in a file (CI logs, `| less`)
    no line is wrapped, unless COLUMNS says a width."""
    from rich.console import Console
    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return Console(highlight=False, emoji=False)
    from .reports.terminal import UNWRAPPED
    return Console(highlight=False, emoji=False, width=UNWRAPPED)


def _written_line(output: str, parts) -> str:
    """With -o, stdout gets one line: where the report is and what it says."""
    n = sum(len(d["findings"]) for d, _ in parts)
    verdicts = ", ".join(dict.fromkeys(str((d.get("verdict") or {}).get("bottleneck")) for d, _ in parts))
    deps = f" in {len(parts)} deployments" if len(parts) > 1 else ""
    return f"diagnose: report written to {output}: {n} finding(s){deps}; verdict {verdicts}"


def doc_skipped(analyses) -> list[dict]:
    """The run's skipped inputs (each deployment's evidence carries the same list)."""
    return next(([x.to_json() for x in a.evidence.skipped] for a in analyses if getattr(a.evidence, "skipped", None)), [])


def _overview(console, parts) -> None:
    """Several deployments: one line each first (what they are, where they come from, the verdict)."""
    from rich.markup import escape
    from .reports.common import deployment_label, differences, printable_tree, run_heading
    console.print(escape(run_heading([d for d, _ in parts])))
    parts = [(printable_tree(d), t) for d, t in parts]
    first = parts[0][0]["deployment"]
    for i, (d, _) in enumerate(parts, 1):
        f = d["findings"]
        diff = differences(first, d["deployment"]) if i > 1 else ""
        console.print(f"  {i}. {escape(deployment_label(d))} — [magenta]{escape(str((d['verdict'] or {}).get('bottleneck')))}[/magenta]"
                      f", {len(f)} finding(s)" + (f", first: {escape(f[0]['id'])}" if f else "")
                      + (f" [dim](vs 1: {escape(diff)})[/dim]" if diff else ""))


def _live_options(files, prom, follow, watch, interval, since, format, output) -> tuple[float, object]:
    """(seconds between passes, the --since window) for --follow / --watch; exit 2 on what cannot work."""
    from .sources.prometheus import parse_since
    if follow and watch:
        _die("--follow is for files, --watch for --prometheus: give one")
    if watch and not prom:
        _die("--watch needs --prometheus URL or --scrape URL (files are followed with --follow)")
    if follow and not files:
        _die("--follow needs files to follow")
    if follow and "-" in files:
        _die("--follow reads files by name: not stdin (pipe into a file, or use the file itself)")
    if output:
        _die("--follow/--watch write to the terminal or, with --format json, JSON Lines on stdout: not with --output")
    if format not in (Format.terminal, Format.json):
        _die(f"--follow/--watch show the terminal view or JSON Lines: not --format {format.value}")
    try:
        every = parse_since(watch or interval).total_seconds()
        window = parse_since(since)
    except ValueError as e:
        _die(f"--{'watch' if watch else 'interval'}: {e}")
    if not every > 0:
        _die("--interval / --watch must be more than 0s")
    return every, window


def _live(files, prom, kw, every, window, format, fail_on, verbose, stop=None, first=None, sampler=None) -> None:
    from .live import run
    as_json = format is Format.json or (format is Format.terminal and not sys.stdout.isatty())
    limit = None if fail_on is FailOn.none else SEVERITIES.index(fail_on.value)
    code = run(files, prom, kw, every, as_json, window, limit, verbose, stop=stop, first=first,
               sample=sampler.take if sampler else None)
    if code:
        _stop_waiting_for_threads(code)
        raise typer.Exit(code)
    _stop_waiting_for_threads(0)


def _scrape_file(url: str, save: str | None) -> str:
    """--scrape's URL checked, and where its samples go: --save, or a temporary file removed at exit."""
    import atexit
    import os
    import tempfile
    from .sources.prometheus import display_url
    if not url.lower().startswith(("http://", "https://")):
        _die(f"--scrape: URL needs http:// or https:// (got {display_url(url)!r})")
    if save:
        return save
    fd, path = tempfile.mkstemp(prefix="diagnose-scrape-", suffix=".prom")
    os.close(fd)
    atexit.register(lambda: os.path.exists(path) and os.unlink(path))
    return path


def _scrape_watch(url: str, watch: str, since: str, save: str | None, timeout: float):
    """--scrape URL --watch DURATION: the sampler (sources/scrape.Sampler), its first two scrapes
    taken DURATION apart (rates need two), keeping the last --since of them in --save or a
    temporary file."""
    import time
    from .sources.prometheus import PromError, display_url, parse_since
    from .sources.scrape import Sampler
    try:
        every, keep = parse_since(watch).total_seconds(), parse_since(since).total_seconds()
    except ValueError as e:
        _die(f"--watch/--since: {e}")
    if not 0 < every <= keep:
        _die(f"--scrape: --watch ({watch}) must be more than 0 and at most --since ({since})")
    path = _scrape_file(url, save)
    sampler = Sampler(url, path, keep, timeout=min(timeout, 30.0))
    print(f"sampling {display_url(url)} every {watch} (the diagnosis over the last {since})…", file=sys.stderr)
    try:
        sampler.take()
        time.sleep(every)
        sampler.take()
    except PromError as e:
        _die(str(e))
    except OSError as e:
        _die(f"--save {save}: cannot write ({e.strerror})")
    return sampler


def _scrape(url: str, duration: str, interval: str, save: str | None, timeout: float) -> str:
    """--scrape: sample the endpoint; the path of the samples (--save, or a temporary file)."""
    from .sources.prometheus import PromError, display_url, parse_since
    from .sources.scrape import sample
    try:
        seconds, every = parse_since(duration).total_seconds(), parse_since(interval).total_seconds()
    except ValueError as e:
        _die(f"--for/--interval: {e}")
    if not 0 < every <= seconds <= 86400:
        _die(f"--scrape: --interval ({interval}) must be more than 0 and at most --for ({duration}, at most 1d)")
    path = _scrape_file(url, save)
    print(f"sampling {display_url(url)} every {interval} for {duration}…", file=sys.stderr)
    try:
        n = sample(url, seconds, every, path, timeout=min(timeout, 30.0))
    except PromError as e:
        _die(str(e))
    except OSError as e:
        _die(f"--save {save}: cannot write ({e.strerror})")
    print(f"{n} scrape(s) taken" + (f", kept in {save}" if save else ""), file=sys.stderr)
    return path


def _prometheus_args(url, since, start_t, end_t, step, match, model, token_file, user, insecure, timeout, partial,
                     deadline=None) -> dict:
    from datetime import datetime, timezone
    from .sources.prometheus import parse_since
    url, user, password = _prometheus_url(url, token_file, user)
    if not timeout > 0:                         # 0, negative, nan: requests raised ValueError
        _die(f"--timeout must be > 0 (got {timeout:g})")
    if timeout > 1e6:                           # inf: the socket raised OverflowError
        _die(f"--timeout must be at most 1000000 s (got {timeout:g})")
    if deadline is not None and not 0 < deadline <= 1e7:
        _die(f"--deadline must be > 0 and at most 10000000 s (got {deadline:g})")
    end = _utc_time("--end", end_t) if end_t is not None else datetime.now(timezone.utc)
    if start_t is not None:
        start = _utc_time("--start", start_t)
    else:
        try:
            start = end - parse_since(since)
        except ValueError as e:
            _die(f"--since: {e}")
        except OverflowError:
            _die(f"--since: too long: {since!r}")
    try:
        if parse_since(step).total_seconds() < 1:
            _die(f"--step: at least 1s: {step!r}")
    except ValueError as e:
        _die(f"--step: {e}")
    if start >= end:
        _die(f"--start ({start:%Y-%m-%dT%H:%M:%SZ}) must be before --end ({end:%Y-%m-%dT%H:%M:%SZ}"
             f"{'' if end_t is not None else ', now'})")
    if model:
        inner = match.strip()[1:-1] if match.strip().startswith("{") else match.strip()
        match = "{" + ",".join(x for x in (inner, f'model_name="{model}"') if x) + "}"
    token = None
    if token_file:
        try:
            with open(token_file, encoding="utf-8") as fh:
                token = fh.read().strip()
        except OSError as e:
            _die(f"{token_file}: cannot read token ({e.strerror})")
    return {"url": url.rstrip("/"), "start": start, "end": end, "step": step, "match": match, "token": token,
            "user": user, "password": password, "insecure": insecure, "timeout": timeout, "partial": partial,
            "deadline": deadline}


def _prometheus_url(url: str, token_file, user):
    """(URL, user, password): the --prometheus URL without its `user:password@` (never shown),
    and the basic-auth pair: --prometheus-user with DIAGNOSE_PROMETHEUS_PASSWORD, or the URL's.
    One way to log in: a token and basic auth together would drop one of them silently."""
    from urllib.parse import urlsplit
    from .redact import redact_secrets
    from .sources.prometheus import display_url, split_credentials
    shown = redact_secrets(display_url(url.strip()))     # a key in the query, a token as a path
    clean, url_auth = split_credentials(url.strip())
    try:
        parts = urlsplit(clean)
        parts.port                              # raises on a port that is not a number
    except ValueError:
        _die(f"--prometheus: not a valid URL: {shown!r} (host or port unreadable)")
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        _die(f"--prometheus: URL needs http:// or https:// (got {shown!r})")
    if token_file and user:
        _die("--prometheus-token-file and --prometheus-user: give one (a bearer token or basic auth), not both")
    if token_file and url_auth:
        _die("--prometheus-token-file and a user:password in the --prometheus URL: give one, not both")
    if user and url_auth:
        _die("--prometheus-user and a user:password in the --prometheus URL: give one, not both")
    if user:
        password = os.environ.get("DIAGNOSE_PROMETHEUS_PASSWORD")
        if password is None:
            _die("--prometheus-user needs the password in the environment variable DIAGNOSE_PROMETHEUS_PASSWORD (not set)")
        return clean, user, password
    return (clean, *url_auth) if url_auth else (clean, None, None)


def _utc_time(option: str, text: str):
    """An ISO time as an aware UTC datetime: `Z` and `±HH:MM` offsets are converted, a time without
    an offset is UTC (what Prometheus shows)."""
    from datetime import timezone
    from ._compat import fromisoformat
    try:
        t = fromisoformat(text.strip())
        return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        _die(f"{option}: not an ISO time: {text!r} (e.g. 2026-11-24T05:18:21Z, 2026-11-24 07:18:21+02:00)")


def _baseline_window(spec: str, prom: dict, kw: dict) -> dict:
    """The same Prometheus query over an earlier window: `START,END` or a shift such as `1d`."""
    from .pipeline import analyze_all
    from .sources.prometheus import PromError, parse_since
    p = dict(prom)
    try:
        if "," in spec:
            a, b = spec.split(",", 1)
            p["start"], p["end"] = _utc_time("--baseline-window", a), _utc_time("--baseline-window", b)
        else:
            shift = parse_since(spec)
            p["start"], p["end"] = prom["start"] - shift, prom["end"] - shift
    except (ValueError, OverflowError) as e:
        _die(f"--baseline-window: {e}")
    if p["start"] >= p["end"]:
        _die("--baseline-window: START must be before END")
    try:
        runs = analyze_all([], prometheus=p, **{k: v for k, v in kw.items() if k != "rule_dirs"}, rule_dirs=kw.get("rule_dirs"))
    except PromError as e:
        _die(f"--baseline-window: {e}")
    run = runs[1] if len(runs) > 1 and runs[0].instance == "fleet" else runs[0]
    return run.to_json()


def _baseline(paths: list[str], kw: dict) -> dict:
    """A saved JSON report is used as is; anything else is diagnosed with the same settings (the
    analysis is kept in _BASELINE_RUN for the HTML report's overlay)."""
    import json
    if len(paths) == 1 and paths[0].endswith(".json"):
        try:
            with open(paths[0], encoding="utf-8") as fh:
                doc = json.load(fh)
        except (OSError, ValueError) as e:
            doc = None
            err = e
        if isinstance(doc, dict) and doc.get("schema_version") in (1, 2):
            from .pipeline import baseline_analysis
            return baseline_analysis(doc)
        if doc is None and not isinstance(err, ValueError):
            _die(f"{paths[0]}: cannot read baseline ({err})")
    from .pipeline import analyze_all
    run = analyze_all(paths, **kw)[0]
    _BASELINE_RUN.append(run)
    return run.to_json()


_BASELINE_RUN: list = []      # the baseline's analysis, when it was diagnosed here (not a saved report)


def _terminal_text(data, timeline, verbose, comparison=None) -> str:
    from rich.console import Console
    from .reports.common import printable
    from .reports.terminal import render as term, render_comparison
    c = Console(record=True, width=120, file=open(os.devnull, "w"), color_system=None, emoji=False)
    term(data, c, timeline, verbose)
    if comparison is not None:
        render_comparison(comparison, c)
    return printable(c.export_text(), newlines=True)


def _report_text(text: str, format: Format) -> str:
    """A rendered report as it may reach a terminal (stdout) or a file someone will `cat`: no raw
    control character. JSON (SARIF too) escapes C0 itself; C1 and bidi controls, which it writes as
    they are, become `\\u009b` escapes (the same JSON). Every other format shows them escaped."""
    from .reports.common import json_safe, printable
    if format in (Format.json, Format.sarif):
        return json_safe(text)
    return printable(text, newlines=True)


def _input_named(output: str, files: list, baseline: list, others: list) -> str | None:
    """The input that `-o` names, if any: the same file (device and inode: through any link or
    relative path) as one of FILES (directories and globs expanded as they are read), a
    --baseline, --targets or --config file, or stdin when it is that file. Replacing it would
    destroy what is being diagnosed."""
    import stat
    try:
        out = os.stat(output)
    except OSError:             # not there yet, or not reachable: no input it can be
        return None
    if not stat.S_ISREG(out.st_mode):
        return None

    def same(st) -> bool:
        return (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino)

    from .sources import InputError, resolve
    candidates = [q for q in others if q]
    for p in [*files, *baseline]:
        if p == "-":
            try:
                if same(os.fstat(sys.stdin.fileno())):
                    return p
            except (OSError, ValueError, AttributeError):
                pass
            continue
        try:
            candidates += [i.path for i in resolve([p])]
        except InputError:      # the analysis says what is wrong with it
            continue
    for q in candidates:
        try:
            if same(os.stat(q)):
                return q
        except OSError:
            continue
    return None


def _write_atomic(path: str, text: str) -> None:
    """Write to a temporary file beside the target, then rename: never a half-written report, and
    the temporary file removed on any failure or signal. A report replaced keeps its mode (a 0600
    report stays 0600); a new one gets 0666 less the umask, as `>` would. A symbolic link is
    written through (the file it names is replaced, the link kept). A device or pipe
    (`-o /dev/stdout`, a FIFO) is written directly: renaming over it would replace the device node
    with a regular file."""
    import stat
    try:
        st = os.stat(path)
    except OSError:
        st = None
    mode = st.st_mode if st is not None else None
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        try:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as e:
            _die(f"{path}: cannot write report ({e.strerror or e})")
        return
    if mode is not None and stat.S_ISDIR(mode):
        _die(f"{path}: is a directory (give a file name for --output)")
    target = os.path.realpath(path) if os.path.islink(path) else path
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        keep = 0o666 & ~umask
    else:
        keep = stat.S_IMODE(mode) & 0o777
    d = os.path.dirname(os.path.abspath(target)) or "."
    tmp = None
    import tempfile
    try:
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".diagnose-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, keep)     # mkstemp's 0600 is for the temporary file, not the report
        os.replace(tmp, target)
        tmp = None
    except OSError as e:
        _die(f"{path}: cannot write report ({e.strerror or e})")
    finally:                    # any failure, a signal (live.Interrupted) included
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


rules_app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                        context_settings=HELP)


@rules_app.command(help="List every rule, or print one rule's full documentation.")
def rules(rule_id: Optional[str] = typer.Argument(None, metavar="[RULE_ID]", show_default=False,
                                                  help="a rule id, e.g. tp-for-small-model"),
          signals: bool = typer.Option(False, "--signals", help="list every signal a rule may name, with its unit and source")) -> None:
    from .ruleset.rules import RETIRED_IDS, RuleError, load_rules, signal_catalogue
    from .reports.ruledocs import rule_doc, rule_table
    if signals:
        cat = signal_catalogue()
        width = max(map(len, cat))
        sys.stdout.write("".join(f"{n:<{width}}  {e.get('unit', '')}  ·  {e.get('source', '')}"
                                 + (f"  ·  {e['about']}" if e.get("about") else "") + "\n" for n, e in sorted(cat.items())))
        return
    try:
        all_rules = load_rules()
    except RuleError as e:
        _die(str(e))
    if rule_id is None:
        sys.stdout.write(rule_table(all_rules))
        return
    match = [r for r in all_rules if r.id == rule_id]
    if not match and rule_id in RETIRED_IDS:
        sys.stdout.write(f"{rule_id}: retired, no longer reported as a finding: {RETIRED_IDS[rule_id]}\n")
        return
    if not match:
        _die(f"unknown rule id `{rule_id}` (see `diagnose rules`)")
    sys.stdout.write(rule_doc(match[0]))


gpu_app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                      context_settings=HELP)


@gpu_app.command(help="Sample the local GPUs through NVML (nvidia-ml-py) and diagnose them; "
                      "--save keeps the samples as a file that `diagnose FILE` reads back later. "
                      "`diagnose gpu FILE…` reads captured samples (nvidia-smi dmon / --query-gpu CSV, DCGM, "
                      "saved NVML samples) with the options of `diagnose FILE…`.")
def gpu(
    live: bool = typer.Option(False, "--live", help="sample the GPUs of this machine now"),
    seconds: float = typer.Option(10.0, "--seconds", metavar="SECONDS", help="how long to sample"),
    interval: float = typer.Option(1.0, "--interval", metavar="SECONDS", help="seconds between samples"),
    save: Optional[str] = typer.Option(None, "--save", metavar="FILE", help="write the samples to this file (JSON lines)"),
    format: Format = typer.Option(Format.terminal, "--format", "-f", help="terminal, markdown, jira, json, sarif, junit or html"),
) -> None:
    if not live:
        _die("gpu: nothing to do — use `diagnose gpu --live [--seconds N] [--interval S] [--save FILE]`, "
             "or `diagnose gpu FILE…` for captured samples")
    if seconds <= 0 or interval <= 0:
        _die("gpu: --seconds and --interval must be positive")
    from .sources.nvml_live import NoGPU, sample, write
    from rich.progress import Progress
    try:
        with Progress(transient=True, console=__import__("rich.console").console.Console(stderr=True)) as bar:
            task = bar.add_task(f"sampling NVML for {seconds:g} s", total=1.0)
            result = sample(seconds, interval, on_tick=lambda f: bar.update(task, completed=f))
    except NoGPU as e:
        _die(f"gpu: {e}")
    path = save
    if path is None:
        import tempfile
        fd, path = tempfile.mkstemp(prefix="diagnose-gpu-", suffix=".jsonl")
        os.close(fd)
    try:
        write(result, path)
    except OSError as e:
        _die(f"{path}: cannot write samples ({e.strerror or e})")
    if save:
        _say(f"samples saved to {save} (read them back with `diagnose {save}`)")
    sys.argv = ["diagnose", "--format", format.value, path]
    try:
        analyze_app(args=sys.argv[1:], prog_name="diagnose", standalone_mode=True)
    finally:
        if not save:
            os.unlink(path)


def _interrupt(signum, frame) -> None:
    """SIGINT/SIGTERM outside --follow/--watch: stop now (live.Interrupted, which no `except
    Exception` takes for an input error); a further signal while the run ends is ignored."""
    from .live import Interrupted
    if getattr(_interrupt, "seen", False):
        return
    _interrupt.seen = True
    raise Interrupted(signum)


def _install_interrupts() -> None:
    _interrupt.seen = False
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupt)


def _stop_waiting_for_threads(code: int) -> None:
    """Where a signal cut a read short, the C scanner's workers may still be on their last block:
    exit now rather than have the interpreter wait for them."""
    import threading
    main_thread = threading.main_thread()
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not main_thread):
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def main() -> None:
    # Importing polars (GPU samples, series) creates ~10^6 objects, and the
    # default threshold (700) walks them over and over. The subcommands (`gpu` samples for as long
    # as asked) keep collecting, just rarely; an analysis does without (below).
    gc.set_threshold(50_000, 20, 20)
    global _GC_PAUSED
    if _GC_PAUSED:
        _GC_PAUSED = False
        gc.enable()
    from .live import Interrupted
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    _install_interrupts()
    try:
        _main()
    except (Interrupted, KeyboardInterrupt) as e:
        code = e.code if isinstance(e, Interrupted) else 130
        try:
            sys.stderr.write("diagnose: interrupted\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        _stop_waiting_for_threads(code)
        raise SystemExit(code) from None
    except BrokenPipeError:
        raise SystemExit(130)
    except SystemExit:
        raise
    except Exception as e:   # last line of defence: one line, never a traceback
        _say(f"internal error: {type(e).__name__}: {e} (please report it with the input)")
        raise SystemExit(3)
    finally:
        # The run is over, its exit status decided: a signal while the interpreter shuts down
        # could only turn a finished run into a killed one (Python puts its own handlers back to
        # the default action then). Called in-process, the caller's handlers come back.
        for sig, handler in previous.items():
            if _AS_PROGRAM:
                signal.signal(sig, signal.SIG_IGN)
            elif handler is not None:
                signal.signal(sig, handler)
        if _AS_PROGRAM:
            # The interpreter's shutdown collects garbage over every object the run made (~8 ms
            # of a small log's run) and none of it needs collecting: the process ends.
            gc.freeze()


def _gpu_files(args: list[str]) -> bool:
    """`diagnose gpu FILE…` (captured samples, not --live): a file or `-` among the arguments."""
    if "--live" in args or "-h" in args or "--help" in args:
        return False
    takes_value = {"--seconds", "--interval", "--save", "--format", "-f"}
    prev = None
    for a in args:
        if (a == "-" or not a.startswith("-")) and prev not in takes_value:
            return True
        prev = a
    return False


def _main() -> None:
    argv = sys.argv[1:]
    if argv[:1] in (["--version"], ["-V"]):
        print(f"diagnose {__version__}")
        return
    if argv[:1] == ["rules"]:
        rules_app(args=argv[1:], prog_name="diagnose rules")
    elif argv[:1] == ["gpu"] and _gpu_files(argv[1:]):
        gc.disable()
        analyze_app(args=argv[1:], prog_name="diagnose")     # `diagnose gpu FILE…`: as `diagnose FILE…`
    elif argv[:1] == ["gpu"]:
        gpu_app(args=argv[1:], prog_name="diagnose gpu")
    elif argv[:1] == ["capacity"]:
        from .capacity.cli import capacity_app
        capacity_app(args=argv[1:], prog_name="diagnose capacity")
    elif argv[:1] == ["schema"]:
        from .reports.json_report import schema_app
        schema_app(args=argv[1:], prog_name="diagnose schema")
    else:
        # One analysis builds its objects once and frees them by reference count: start-up
        # (typer, the parsers; polars where used) creates objects that every collection walks
        # again, and reading a 10 GB log peaks at the same RSS without the collector (151 vs
        # 154 MB). Collection only costs time here: 0.02-0.03 s of a run that loads polars.
        gc.disable()
        analyze_app(args=argv, prog_name="diagnose")

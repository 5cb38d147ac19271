"""`--format html`: one self-contained file for a ticket or an incident review.

Verdict, deployment, ranked findings with their evidence (redacted as in every format) and a copy
button per flag change, the corrected launch command, a load sweep's table, and plots on one
shared time axis (uPlot, inlined: nothing is fetched from the network, so the file works offline
and as an attachment). Every text from an input is HTML-escaped; the plot data travels as JSON in
a `<script type="application/json">` block with `<` escaped, so no log line can close it.

The page records its own script errors and how many plots it drew on `<body>`
(`data-plots`, `data-errors`): what the browser test reads.
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

from .. import __version__
from .common import (coverage_summary, deployment_label, differences, evidence_line, fix_lines, input_warnings,
                     launches_text, nothing_read_hint, skipped_lines, summary_rows, sweep_table, window_rows)

VENDOR = Path(__file__).resolve().parent.parent / "data" / "vendor"
SEV_COLOUR = {"critical": "#b00020", "high": "#d93f0b", "medium": "#b08800", "low": "#1f6feb", "info": "#57606a"}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
main{max-width:1200px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:20px;margin:8px 0} h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.verdict{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:10px 14px}
.warn{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:6px 12px;margin:6px 0}
.verdict b{color:#8250df} table{border-collapse:collapse;background:#fff} td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.finding{background:#fff;border:1px solid #d0d7de;border-left:6px solid var(--c);border-radius:6px;padding:10px 14px;margin:10px 0}
.sev{color:#fff;background:var(--c);border-radius:4px;padding:1px 6px;font-size:12px;text-transform:uppercase}
code,pre{font:12.5px ui-monospace,SFMono-Regular,Menlo,monospace} pre{background:#f6f8fa;padding:8px;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
.flag{display:inline-flex;gap:6px;align-items:center;margin:2px 6px 2px 0;background:#ddf4ff;border-radius:4px;padding:1px 6px}
button.copy{font-size:11px;border:1px solid #8c959f;background:#fff;border-radius:4px;cursor:pointer;padding:0 6px}
.dim{color:#57606a} table.kv{display:grid;grid-template-columns:auto 1fr auto 1fr;border-top:1px solid #d0d7de;border-left:1px solid #d0d7de} table.kv tbody,table.kv tr{display:contents} table.kv th,table.kv td{border-width:0 1px 1px 0} @media (max-width:700px){table.kv{grid-template-columns:auto 1fr}} .plots{display:grid;grid-template-columns:1fr;gap:6px} .plot{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:4px}
details summary{cursor:pointer}
"""

# Plots: one uPlot per panel, cursors synced, times shown as written in the input (UTC wall-clock).
JS = r"""
(function(){
  var errs=[];window.addEventListener('error',function(e){errs.push(String(e.message))});
  var ce=console.error;console.error=function(){errs.push([].join.call(arguments,' '));ce.apply(console,arguments)};
  function done(n){document.body.dataset.plots=n;document.body.dataset.errors=errs.length;document.body.dataset.errorText=errs.join(' | ')}
  document.querySelectorAll('button.copy').forEach(function(b){b.addEventListener('click',function(){
    var t=b.getAttribute('data-copy');if(navigator.clipboard){navigator.clipboard.writeText(t)}b.textContent='copied'})});
  var n=0;
  try{
    var data=JSON.parse(document.getElementById('plot-data').textContent);
    var palette=['#0969da','#cf222e','#1a7f37','#8250df','#bf8700','#1b7c83','#953800','#6e7781'];
    var sync=uPlot.sync('diagnose');
    // the steady window the runtime findings rest on (a band) and each finding's timed evidence (a
    // dashed line). Labels go left to right, each in the first of three rows where it overlaps no
    // other label and inside the plot (turned left of its line at the right end); the same
    // finding's label close by is said once, and one with no room is left out (its line stays).
    // Where each label went is kept on the plot (data-labels, CSS pixels): what the browser test reads.
    function marker(band,marks){return{hooks:{draw:[function(u){var c=u.ctx,b=u.bbox,r=devicePixelRatio||1;c.save();
      if(band){var x0=u.valToPos(band[0],'x',true),x1=u.valToPos(band[1],'x',true);c.fillStyle='rgba(191,135,0,0.10)';c.fillRect(x0,b.top,x1-x0,b.height)}
      c.font=(10*r)+'px sans-serif';c.textAlign='left';c.textBaseline='alphabetic';var rows=[[],[],[]],placed=[],pad=6*r,right=b.left+b.width;
      var shown=marks.map(function(m){return{label:m.label,x:u.valToPos(m.t,'x',true)}}).filter(function(o){return o.x>=b.left&&o.x<=right})
        .sort(function(p,q){return p.x-q.x});
      c.strokeStyle='#cf222e';c.setLineDash([4*r,3*r]);       // every line first: no line crosses a label
      shown.forEach(function(o){c.beginPath();c.moveTo(o.x,b.top);c.lineTo(o.x,b.top+b.height);c.stroke()});c.setLineDash([]);
      shown.forEach(function(o){
        var w=c.measureText(o.label).width,tx=o.x+3*r+w>right?o.x-3*r-w:o.x+3*r;tx=Math.max(b.left,Math.min(tx,right-w));
        if(placed.some(function(p){return p.label===o.label&&o.x-p.at<w+pad}))return;
        var row=rows.findIndex(function(boxes){return boxes.every(function(q){return tx>=q[1]+pad||tx+w<=q[0]-pad})});
        if(row<0)return;
        rows[row].push([tx,tx+w]);var ty=b.top+(12+11*row)*r;
        c.fillStyle='rgba(255,255,255,0.85)';c.fillRect(tx-r,ty-9*r,w+2*r,11*r);c.fillStyle='#cf222e';c.fillText(o.label,tx,ty);
        placed.push({label:o.label,at:o.x,row:row,x0:tx/r,x1:(tx+w)/r,y0:(ty-9*r)/r,y1:(ty+2*r)/r,left:b.left/r,right:right/r})});
      u.root.dataset.labels=JSON.stringify(placed);c.restore()}]}}}
    data.forEach(function(block){
      var host=document.getElementById(block.id);if(!host)return;
      // one time axis for every panel of an analysis: engine stats and GPU samples line up
      var lo=Infinity,hi=-Infinity;block.panels.forEach(function(p){if(p.time&&p.x.length){lo=Math.min(lo,p.x[0]);hi=Math.max(hi,p.x[p.x.length-1])}});
      // a crash a few seconds after the last stats line is still on the axis (marks far outside it are not)
      (block.marks||[]).forEach(function(m){if(hi>lo&&m.t>=lo-(hi-lo)*0.2&&m.t<=hi+(hi-lo)*0.2){lo=Math.min(lo,m.t);hi=Math.max(hi,m.t)}});
      block.panels.forEach(function(p){
        var div=document.createElement('div');div.className='plot';host.appendChild(div);
        var opts={title:p.title+(p.unit?' ('+p.unit+')':''),width:Math.max(320,host.clientWidth-12),height:170,
          scales:{x:(p.time&&hi>lo)?{time:true,range:function(){return[lo,hi]}}:{time:p.time}},cursor:{sync:{key:sync.key}},
          tzDate:function(ts){return uPlot.tzDate(new Date(ts*1e3),'Etc/UTC')},
          series:[{}].concat(p.series.map(function(s,i){return p.band&&i>0?{label:s.label,stroke:'rgba(9,105,218,0.35)',width:1,spanGaps:false}:
            {label:s.label,stroke:palette[i%palette.length],width:1.5,spanGaps:false}}))};
        // many GPUs: the band between the lowest and the highest GPU, under their mean
        if(p.band)opts.bands=[{series:[p.band[1],p.band[0]],fill:'rgba(9,105,218,0.15)'}];
        if(p.time)opts.plugins=[marker(block.band,block.marks||[])];
        var rows=[p.x].concat(p.series.map(function(s){return s.y}));
        // the baseline, from the same start: its elapsed time laid on this run's axis, dashed
        var bp=(block.before||[]).filter(function(b){return b.title===p.title&&b.x.length&&p.x.length})[0];
        if(bp){var shift=p.x[0]-bp.x[0];
          rows=uPlot.join([rows,[bp.x.map(function(x){return x+shift})].concat(bp.series.map(function(s){return s.y}))]);
          bp.series.forEach(function(s,i){opts.series.push({label:'before: '+s.label,stroke:palette[i%palette.length],dash:[5,4],width:1,spanGaps:true})})}
        new uPlot(opts,rows,div);n++;
      });
    });
  }catch(e){errs.push(String(e))}
  done(n);
})();
"""


def _e(x) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _t(x) -> str:
    """Prose from a rule or the verdict: escaped, then its `code spans` shown as code."""
    return re.sub(r"`([^`<>]+)`", r"<code>\1</code>", _e(x))


def _copy(text: str, label: str | None = None) -> str:
    return (f'<span class="flag"><code>{_e(label or text)}</code>'
            f'<button class="copy" type="button" data-copy="{_e(text)}" title="copy">copy</button></span>')


def _analysis(d: dict, panels: list, idx: int) -> list[str]:
    v = d.get("verdict") or {}
    dep = d.get("deployment") or {}
    out = []
    who = f"replica {d['instance']}" if d.get("instance") and d["instance"] != "fleet" else (
        "fleet" if d.get("instance") == "fleet" else dep.get("model") or "unknown model")
    out.append(f"<h1>{_e(who)} <span class=dim>({_e(dep.get('engine') or 'unknown engine')})</span> — "
               f"{len(d['findings'])} finding(s)</h1>")
    out += [f'<div class="warn">⚠ {_e(w)}</div>' for w in input_warnings(d["inputs"])]
    out.append('<div class="verdict">Bottleneck: <b>' + _e(v.get("bottleneck")) + "</b>"
               + (f" <span class=dim>(also: {_e(', '.join(v.get('also') or []))})</span>" if v.get("also") else "") + "<ul>")
    out += [f"<li>{_t(s)}</li>" for s in v.get("signals", [])]
    if v.get("window"):
        out.append(f"<li class=dim>{_e(v['window'])}</li>")
    where = launches_text(d)
    if where:
        out.append(f"<li class=dim>{_e(where)}</li>")
    several = len(d["inputs"]) > 1
    for i in d["inputs"]:
        out += [f"<li class=dim>note: {_e(i['path'] + ': ' if several else '')}{_e(n)}</li>" for n in i.get("errors") or []]
    out.append("</ul></div>")
    hint = None if d["findings"] else nothing_read_hint(d)
    out.append("<h2>Findings</h2>" if d["findings"] else f"<h2>Findings</h2><p>{_t(hint) if hint else 'No findings.'}</p>")
    for n, f in enumerate(d["findings"], 1):
        c = SEV_COLOUR.get(f["severity"], "#57606a")
        out.append(f'<section class="finding" style="--c:{c}" id="f-{idx}-{n}">')
        out.append(f'<div><span class="sev">{_e(f["severity"])}</span> <b>{_e(f["id"])}</b> '
                   f'<span class=dim>({_e(f["confidence"])} confidence)</span></div>')
        out.append(f"<p>{_t(f['title'])}</p>")
        flags = fix_lines(f["fix"])
        out.append(f"<p>→ <b>{_t(f['fix_title'])}</b></p>")
        if flags:
            out.append("<p>" + "".join(_copy(x) for x in flags) + "</p>")
        if f["fix"].get("note"):
            out.append(f"<p class=dim>{_t(f['fix']['note'])}</p>")
        if f.get("impact"):
            out.append(f"<p>Impact: {_t(f['impact'])}</p>")
        if f.get("fix_risk"):
            out.append(f"<p class=dim>Risk: {_t(f['fix_risk'])}</p>")
        if f["evidence"]:
            out.append("<details open><summary>Evidence</summary><pre>"
                       + "\n".join(_e(evidence_line(e)) for e in f["evidence"]) + "</pre></details>")
        out.append("</section>")
    fix = d.get("fix")
    if fix and fix.get("command"):
        out.append("<h2>Corrected launch command</h2>" + _copy(fix["command"], "copy the command")
                   + f"<pre>{_e(fix['command'])}</pre>")
    if panels:
        out.append(f'<h2>Timeline</h2><div class="plots" id="plots-{idx}"></div>')
    rows = summary_rows(dep)
    if rows:
        out.append('<h2>Deployment</h2><table class="kv">')
        out += [f"<tr><th>{_e(k)}</th><td><code>{_e(val)}</code></td></tr>" for k, val in rows]
        out.append("</table>")
    rows = window_rows(d.get("signals"))
    if rows:
        out.append("<h2>Over the whole window</h2><table>")
        out += [f"<tr><th>{_e(k)}</th><td>{_e(val)}</td></tr>" for k, val in rows]
        out.append("</table>")
    if d.get("sweep"):
        header, srows, notes = sweep_table(d["sweep"])
        out.append("<h2>Load sweep</h2><table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>")
        for r in srows:
            out.append("<tr>" + "".join(f'<td class="{"n" if 0 < i < len(r) - 1 else ""}">{_e(c)}</td>' for i, c in enumerate(r)) + "</tr>")
        out.append("</table><ul>" + "".join(f"<li class=dim>{_e(n)}</li>" for n in notes) + "</ul>")
    notes = "; ".join(coverage_summary(i) for i in d["inputs"])
    out.append(f"<p class=dim><small>{_e(notes)} · {len(d['not_applicable'])} rule(s) not applicable · "
               f"diagnose {_e(__version__)}</small></p>")
    return out


def render(parts: list[tuple], comparison: dict | None = None, before: list | None = None,
           skipped: list | None = None) -> str:
    """parts: (the analysis as JSON, its plot panels from signals.series.plot_series, and what
    signals.series.plot_marks marks on them). `before`: the baseline's panels, overlaid on the first
    analysis' plots from the same start (elapsed time), dashed. `skipped`: inputs left out."""
    body, data = [], []
    if len(parts) > 1:          # a fleet or a mixed directory: one row per replica / deployment first
        body.append("<h1>Overview</h1><table><tr><th>replica / deployment</th><th>bottleneck</th><th>findings</th>"
                    "<th>first finding</th><th>differs from the first in</th></tr>")
        first = (parts[0][0].get("deployment") or {})
        for idx, (d, *_) in enumerate(parts):
            who = d.get("instance") or deployment_label(d)
            top = d["findings"][0] if d["findings"] else None
            diff = differences(first, d.get("deployment") or {}) if idx and not d.get("instance") else ""
            body.append(f'<tr><td><a href="#a-{idx}">{_e(who)}</a></td><td>{_e((d.get("verdict") or {}).get("bottleneck"))}</td>'
                        f'<td class=n>{len(d["findings"])}</td><td>{_e(top["id"] if top else "")}</td><td>{_e(diff)}</td></tr>')
        body.append("</table>")
    if skipped:
        body.append("<ul>" + "".join(f"<li class=dim>{_e(x)}</li>" for x in skipped_lines(skipped)) + "</ul>")
    for idx, (d, panels, marks) in enumerate(parts):
        body.append(f'<a id="a-{idx}"></a>')
        if idx:
            body.append("<hr>")
        body += _analysis(d, panels, idx)
        if panels:
            data.append({"id": f"plots-{idx}", "panels": panels, **(marks or {}),
                         **({"before": before} if before and idx == 0 else {})})
    if comparison:
        body.append("<h2>Compared with the baseline</h2><table><tr><th>signal</th><th>before</th><th>after</th>"
                    "<th>change</th><th>verdict</th></tr>")
        for name, s in comparison["signals"].items():
            ch = f"{s['change'] * 100:+.0f} %" if s.get("change") is not None else ""
            body.append(f"<tr><td>{_e(name)}</td><td class=n>{_e(s['before'])}</td><td class=n>{_e(s['after'])}</td>"
                        f"<td class=n>{_e(ch)}</td><td><b>{_e(s['verdict'])}</b></td></tr>")
        body.append(f"</table><p class=dim>{_e(comparison['rule'])}</p>")
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False, default=str).replace("<", "\\u003c")
    js_lib = (VENDOR / "uPlot.iife.min.js").read_text(encoding="utf-8")
    css_lib = (VENDOR / "uPlot.min.css").read_text(encoding="utf-8")
    title = _e(parts[0][0].get("deployment", {}).get("model") or "diagnose report") if parts else "diagnose report"
    return ("<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'; img-src data:\">"
            f"<meta name=viewport content=\"width=device-width,initial-scale=1\"><title>diagnose: {title}</title>"
            f"<style>{css_lib}{CSS}</style></head><body><main>\n" + "\n".join(body)
            + f"\n</main><script type=\"application/json\" id=\"plot-data\">{payload}</script>"
            f"<script>{js_lib}</script><script>{JS}</script></body></html>\n")

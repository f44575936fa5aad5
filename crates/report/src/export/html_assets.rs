//! The page's inline stylesheet and script. Both are constants: nothing in them comes from the
//! data, which reaches the script only through the escaped JSON block `#report-data`.

pub const CSS: &str = r#"
:root { --fg: #1d2330; --muted: #5b6472; --line: #d9dde3; --bg: #ffffff; --panel: #f6f7f9;
  --accent: #0b5cad; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1120px; margin: 0 auto; padding: 28px 28px 60px; }
h1 { font-size: 26px; margin: 0 0 4px; letter-spacing: -0.01em; }
h2 { font-size: 19px; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 2px solid var(--fg); }
h3 { font-size: 15px; margin: 22px 0 6px; }
.subtitle { color: var(--muted); margin: 0 0 14px; }
.meta { color: var(--muted); font-size: 13px; }
.meta b { color: var(--fg); font-weight: 600; }
.banner { background: #fff4e0; border-left: 4px solid #d58a00; padding: 8px 12px; margin: 12px 0; }
.note { color: var(--muted); font-size: 13px; }
#key-findings { background: var(--panel); border: 1px solid var(--line); border-radius: 6px;
  padding: 14px 18px 14px 22px; }
#key-findings ul { margin: 0; padding-left: 18px; }
#key-findings li { margin: 4px 0; }
#key-findings li .ratio { font-weight: 700; color: var(--accent); }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0 10px; }
th, td { padding: 4px 9px; border-bottom: 1px solid var(--line); text-align: right;
  font-variant-numeric: tabular-nums; white-space: nowrap; }
th { background: var(--panel); font-weight: 600; border-bottom: 1px solid #b9c0ca; }
th:first-child, td:first-child, td.name, th.name { text-align: left; }
td.zero { color: #b3b9c2; }
td.outcome-reproduced { color: #1b7a3e; } td.outcome-reversed { color: #b3261e; font-weight: 600; }
td.outcome-differs { color: #b35a00; } td.outcome-inconclusive, td.outcome-not_in_b { color: var(--muted); }
.scroll { overflow-x: auto; }
.weights { display: flex; flex-wrap: wrap; gap: 8px 22px; margin: 8px 0 12px; }
.weights label { display: flex; align-items: center; gap: 8px; font-size: 13px; }
.weights input[type=range] { width: 120px; accent-color: var(--accent); }
.weights output { min-width: 2.5em; font-variant-numeric: tabular-nums; color: var(--muted); }
.weights label.off { color: #a0a6b0; }
#card-table td.total { font-weight: 700; }
.grade { display: inline-block; min-width: 1.8em; text-align: center; border-radius: 4px;
  font-weight: 700; color: #fff; }
.grade-A { background: #1b7a3e; } .grade-B { background: #4f8f2f; } .grade-C { background: #b58900; }
.grade-D { background: #c0661a; } .grade-F { background: #b3261e; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(480px, 1fr)); gap: 14px 20px; }
.chart { width: 100%; height: auto; background: #fff; border: 1px solid var(--line); border-radius: 4px; }
.chart text { font-family: inherit; fill: var(--fg); }
.chart .chart-title { font-size: 14px; font-weight: 600; }
.chart .legend, .chart .group, .chart .tick { font-size: 11px; }
.chart .tick, .chart .axis-label { fill: var(--muted); }
.chart .axis-label { font-size: 11px; }
.chart .mark-label { font-size: 10px; }
.chart .mark { stroke-width: 1.2; }
.chart .na { font-size: 10px; fill: #a0a6b0; }
.chart .grid { stroke: #eceef1; stroke-width: 1; }
.chart .axis { stroke: #8a929e; stroke-width: 1; }
.chart .err { stroke: #1d2330; stroke-width: 1.2; fill: none; }
.chart .line { fill: none; stroke-width: 2; }
.chart.forest { width: auto; max-width: 100%; height: auto; display: block; margin: 8px 0 14px; }
.chart .group-title { font-size: 12px; font-weight: 600; }
.chart .verdict { font-size: 11px; font-weight: 600; }
details { margin: 6px 0; }
summary { cursor: pointer; font-weight: 600; }
pre { background: var(--panel); border: 1px solid var(--line); padding: 10px 12px; overflow-x: auto;
  font-size: 12px; border-radius: 4px; }
.ts-chart { max-width: 760px; }
.tl-row { margin: 8px 0 14px; }
.tl-name { font-weight: 600; font-size: 13px; margin: 0 0 4px; }
.tl-cells { display: grid; grid-template-columns: repeat(auto-fit, minmax(300px, 1fr)); gap: 8px 12px; }
.tl-cells .chart { max-width: 640px; }
.chart.timeline .chart-title { font-size: 12px; }
.chart.timeline .tick, .chart.timeline .axis-label { font-size: 9px; }
.chart.timeline .mark-label { font-size: 8.5px; }
.tl-tput, .tl-p50, .tl-p99 { fill: none; stroke-width: 1.4; }
.tl-p99 { stroke-width: 1; stroke-opacity: 0.8; }
.tl-band-p99-max { fill-opacity: 0.15; stroke: none; }
.tl-band-p50-p99 { fill-opacity: 0.45; stroke: none; }
.tl-ramp { fill: #eceef1; }
.tl-steady { fill: #1b7a3e; fill-opacity: 0.09; }
.tl-steady.tl-unsteady { fill: #b3261e; fill-opacity: 0.09; }
.tl-stall { fill: #b3261e; fill-opacity: 0.2; }
.tl-asked { stroke: #555555; stroke-dasharray: 5 3; stroke-width: 1; }
.tl-mark { stroke-dasharray: 3 2; stroke-width: 1.2; }
.tl-mark.tl-fault { stroke: #d55e00; } .chart text.tl-fault { fill: #d55e00; }
.tl-mark.tl-path { stroke: #cc79a7; } .chart text.tl-path { fill: #a0507f; }
.tl-mark.tl-error { stroke: #b3261e; } .chart text.tl-error { fill: #b3261e; }
.tl-mark.tl-precondition { stroke: #8a929e; } .chart text.tl-precondition { fill: #5b6472; }
select { font: inherit; padding: 2px 6px; }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
@media print { .weights input { display: none; } }
"#;

pub const JS: &str = r##"
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var card = data.card;
  function grade(t) { return t >= 90 ? "A" : t >= 80 ? "B" : t >= 70 ? "C" : t >= 60 ? "D" : "F"; }
  var inputs = Array.prototype.slice.call(
    document.querySelectorAll('#report-card input[data-category]'));
  function weights() {
    var w = {};
    inputs.forEach(function (i) {
      var v = parseFloat(i.value);
      w[i.getAttribute("data-category")] = isFinite(v) && v > 0 ? v : 0;
      var out = document.getElementById("w-out-" + i.getAttribute("data-category"));
      if (out) { out.textContent = String(isFinite(v) ? v : 0); }
    });
    return w;
  }
  function update() {
    var w = weights();
    var ranked = card.rows.map(function (r) {
      var sum = 0, wsum = 0;
      card.categories.forEach(function (c) {
        var wt = w[c.key] || 0;
        if (!c.available || wt <= 0) { return; }
        sum += wt * (r.scores[c.key] || 0);
        wsum += wt;
      });
      return { target: r.target, total: wsum > 0 ? sum / wsum : 0 };
    });
    ranked.sort(function (a, b) {
      if (b.total !== a.total) { return b.total - a.total; }
      return a.target < b.target ? -1 : a.target > b.target ? 1 : 0;
    });
    var tbody = document.querySelector("#card-table tbody");
    var byName = {};
    Array.prototype.forEach.call(tbody.querySelectorAll("tr[data-target]"), function (tr) {
      byName["t:" + tr.getAttribute("data-target")] = tr;
    });
    ranked.forEach(function (x, i) {
      var tr = byName["t:" + x.target];
      if (!tr) { return; }
      var g = grade(x.total);
      tr.querySelector(".rank").textContent = String(i + 1);
      tr.querySelector(".total").textContent = String(Math.round(x.total));
      var cell = tr.querySelector(".grade");
      cell.textContent = g;
      cell.className = "grade grade-" + g;
      tbody.appendChild(tr);
    });
  }
  inputs.forEach(function (i) {
    i.addEventListener("input", update);
    i.addEventListener("change", update);
  });
  update();
  var sel = document.getElementById("ts-select");
  if (sel) {
    var show = function () {
      Array.prototype.forEach.call(document.querySelectorAll(".ts-chart"), function (d) {
        d.hidden = d.getAttribute("data-workload") !== sel.value;
      });
    };
    sel.addEventListener("change", show);
    show();
  }
})();
"##;

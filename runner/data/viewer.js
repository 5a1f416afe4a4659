"use strict";
// The viewer of report.html. Its data is the JSON in #runner-data; every text from it is
// shown through textContent (never innerHTML), and no link is made from it.
(function () {
  const D = JSON.parse(document.getElementById("runner-data").textContent);
  const RUNS = D.runs;
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function model(r) { return D.cols[r.col][0]; }
  function variant(r) { return D.cols[r.col][1]; }
  function colName(r) { const v = variant(r); return v === null ? model(r) : model(r) + " / " + v; }
  function num(n) { return n === null || n === undefined ? "" : n.toLocaleString("en"); }
  function money(c) { return c === null || c === undefined ? "n/a" : "$" + c.toFixed(c < 1 ? 4 : 2); }
  function secs(s) { return s < 60 ? s.toFixed(1) + "s" : Math.floor(s / 60) + "m" + Math.round(s % 60) + "s"; }

  // The columns of the list and of the CSV: label, value for sorting and export, and text.
  const COLS = [
    ["#", (r) => r.n, (r) => String(r.n + 1)],
    ["Run", (r) => r.run, (r) => r.run],
    ["Task", (r) => D.tasks[r.task], (r) => D.tasks[r.task]],
    ["Model", model, model],
    ["Variant", (r) => variant(r) || "", (r) => variant(r) || ""],
    ["Status", (r) => r.status, (r) => r.status + (r.skip ? " (" + r.skip + ")" : "")],
    ["Requests", (r) => r.requests, (r) => num(r.requests)],
    ["Tool calls", (r) => r.tools, (r) => num(r.tools)],
    ["Input tokens", (r) => r.input, (r) => num(r.input)],
    ["Output tokens", (r) => r.output, (r) => num(r.output)],
    ["Cost", (r) => (r.cost === null ? -1 : r.cost), (r) => money(r.cost)],
    ["Time", (r) => r.time, (r) => secs(r.time)],
    ["Retries", (r) => r.retries, (r) => num(r.retries)],
    ["Reward", (r) => (r.reward === null ? -1 : r.reward),
      (r) => (r.reward === null ? "" : String(r.reward)) + (r.resolution ? " " + r.resolution : "")],
  ];
  RUNS.forEach((r, i) => { r.n = i; });

  const state = { status: "", model: "", variant: "", task: "", q: "", sort: 0, dir: 1 };
  let shown = [];
  let selected = -1;

  // Search: each run's text, lower-cased once, on first use.
  let haystacks = null;
  function haystack(i) {
    if (haystacks === null) haystacks = new Array(RUNS.length);
    if (haystacks[i] === undefined) {
      const r = RUNS[i];
      const parts = [r.run, r.error || "", r.final || "", r.check ? r.check.command + "\n" + r.check.tail : "", r.patch || ""];
      for (const e of r.transcript) parts.push(e[1], e[2]);
      haystacks[i] = parts.join("\n").toLowerCase();
    }
    return haystacks[i];
  }

  function options(select, pairs) {
    select.replaceChildren();
    for (const [value, label] of pairs) {
      const o = el("option", null, label);
      o.value = value;
      select.appendChild(o);
    }
  }
  function distinct(values) { return Array.from(new Set(values)); }

  function setupFilters() {
    const statuses = distinct(RUNS.map((r) => r.status)).sort();
    options($("f-status"), [["", "all"], ["!passed", "not passed"],
      ...["passed", "failed", "errored", "skipped"].map((v) => ["v:" + v, v]),
      ...statuses.map((s) => ["s:" + s, "status " + s])]);
    options($("f-model"), [["", "all"], ...distinct(D.cols.map((c) => c[0])).map((m) => [m, m])]);
    const variants = distinct(D.cols.map((c) => c[1]));
    options($("f-variant"), [["", "all"], ...variants.map((v) => (v === null ? ["\u0000", "(none)"] : [v, v]))]);
    options($("f-task"), [["", "all"], ...D.tasks.map((t, i) => [String(i), t])]);
    options($("s-task"), D.tasks.map((t, i) => [String(i), t]));
    for (const [id, key] of [["f-status", "status"], ["f-model", "model"], ["f-variant", "variant"], ["f-task", "task"]]) {
      $(id).addEventListener("change", () => { state[key] = $(id).value; refresh(); });
    }
    let timer = 0;
    $("f-q").addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => { state.q = $("f-q").value.trim().toLowerCase(); refresh(); }, 150);
    });
    $("f-reset").addEventListener("click", () => { setFilters("", "", "", ""); $("f-q").value = ""; state.q = ""; refresh(); });
    $("f-csv").addEventListener("click", exportCsv);
    $("s-task").addEventListener("change", drawSide);
    $("s-by").addEventListener("change", drawSide);
  }

  function setFilters(status, m, v, task) {
    Object.assign(state, { status: status, model: m, variant: v, task: task });
    $("f-status").value = status; $("f-model").value = m; $("f-variant").value = v; $("f-task").value = task;
  }

  function keep(r) {
    const s = state.status;
    if (s === "!passed" && r.verdict === "passed") return false;
    if (s.startsWith("v:") && r.verdict !== s.slice(2)) return false;
    if (s.startsWith("s:") && r.status !== s.slice(2)) return false;
    if (state.model && model(r) !== state.model) return false;
    if (state.variant && (variant(r) === null ? "\u0000" : variant(r)) !== state.variant) return false;
    if (state.task && String(r.task) !== state.task) return false;
    return !state.q || haystack(r.n).includes(state.q);
  }

  function setupTable() {
    const tr = $("runs-table").tHead.rows[0];
    COLS.forEach((c, i) => {
      const th = el("th", null, c[0]);
      th.dataset.col = String(i);
      th.addEventListener("click", () => {
        state.dir = state.sort === i ? -state.dir : 1;
        state.sort = i;
        refresh();
      });
      tr.appendChild(th);
    });
    $("runs-table").addEventListener("click", (ev) => {
      const row = ev.target.closest("tbody tr");
      if (row && row.dataset.run) showRun(Number(row.dataset.run), true);
    });
  }

  function refresh() {
    const started = performance.now();
    const key = COLS[state.sort][1];
    shown = RUNS.filter(keep);
    shown.sort((a, b) => {
      const x = key(a), y = key(b);
      const c = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
      return (c || a.n - b.n) * state.dir;
    });
    const body = document.createElement("tbody");
    for (const r of shown) {
      const tr = document.createElement("tr");
      tr.dataset.run = String(r.n);
      if (r.n === selected) tr.className = "sel";
      for (const c of COLS) tr.appendChild(el("td", null, c[2](r)));
      tr.cells[5].className = "v-" + r.verdict;
      body.appendChild(tr);
    }
    $("runs-table").replaceChild(body, $("runs-table").tBodies[0]);
    const ths = $("runs-table").tHead.rows[0].cells;
    for (let i = 0; i < ths.length; i++) {
      ths[i].textContent = COLS[i][0] + (i === state.sort ? (state.dir > 0 ? " \u25b2" : " \u25bc") : "");
    }
    $("f-count").textContent = shown.length + " of " + RUNS.length + " runs" +
      (state.q ? " (search covers the transcripts as kept in this page)" : "");
    // How long the last filter took: the benchmark (bench/reports.py) reads it.
    document.documentElement.dataset.drawn = String(Math.round(performance.now() - started));
  }

  function csvField(v) {
    let s = v === null || v === undefined ? "" : String(v);
    // A spreadsheet would run a cell that starts like a formula.
    if (typeof v === "string" && /^[=+\-@\t\r]/.test(s)) s = "'" + s;
    return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }
  function csvText() {
    const head = ["run", "task", "model", "variant", "repeat", "status", "verdict", "skip_reason",
      "requests", "tool_calls", "input_tokens", "cached_tokens", "output_tokens", "cost_usd",
      "duration_s", "error", "retries", "retry_wait_s", "redone_attempts", "redone_tokens",
      "redone_cost_usd", "reward", "resolution"];
    const lines = [head.join(",")];
    for (const r of shown) {
      const redo = r.redone || [null, null, null];
      lines.push([r.run, D.tasks[r.task], model(r), variant(r), r.repeat, r.status, r.verdict, r.skip,
        r.requests, r.tools, r.input, r.cached, r.output, r.cost, r.time, r.error, r.retries, r.wait,
        redo[0], redo[1], redo[2], r.reward, r.resolution].map(csvField).join(","));
    }
    return lines.join("\r\n") + "\r\n";
  }
  function exportCsv() {
    const url = URL.createObjectURL(new Blob([csvText()], { type: "text/csv" }));
    const a = document.createElement("a");
    a.href = url;
    a.download = "runs.csv";
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }

  function pre(text) { return el("pre", null, text); }

  function tokenChart(r) {
    const reqs = r.chart;
    if (!reqs.length) return el("p", "note", "No request was made.");
    const top = Math.max(1, ...reqs.map((q) => q[0] + q[1] + q[2]));
    const bar = 14, gap = 4, height = 160, bottom = 20, plot = height - bottom - 10;
    const width = Math.max(200, 50 + reqs.length * (bar + gap));
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("width", String(width));
    svg.setAttribute("height", String(height));
    function rect(cls, x, y, w, h, fill) {
      const e = document.createElementNS(SVG, "rect");
      e.setAttribute("class", cls);
      for (const [k, v] of [["x", x], ["y", y], ["width", w], ["height", h], ["fill", fill]]) e.setAttribute(k, String(v));
      svg.appendChild(e);
      return e;
    }
    const label = document.createElementNS(SVG, "text");
    label.setAttribute("x", "4"); label.setAttribute("y", "12"); label.setAttribute("font-size", "11");
    label.textContent = num(top) + " tokens";
    svg.appendChild(label);
    reqs.forEach((q, i) => {
      const x = 40 + i * (bar + gap), base = height - bottom;
      const ch = plot * q[0] / top, uh = plot * q[1] / top, oh = plot * q[2] / top;
      rect("cached", x, base - ch, bar, ch, "#1565c0");
      rect("uncached", x, base - ch - uh, bar, uh, "#90caf9");
      rect("output", x, base - ch - uh - oh, bar, oh, "#ffb74d");
      if (q[3]) {
        const c = rect("compaction", x - 1, 10, bar + 2, plot, "none");
        c.setAttribute("stroke", "#c62828"); c.setAttribute("stroke-width", "2");
      }
    });
    const box = el("div");
    box.appendChild(svg);
    box.appendChild(el("p", "note", "Per request: dark blue cached input, light blue uncached input, orange output; red outline a compaction request."));
    return box;
  }

  function transcript(r) {
    const box = el("div");
    if (!r.transcript.length) box.appendChild(el("p", "note", "No transcript (the run did not start or wrote no events)."));
    const half = r.cut ? Math.ceil(r.transcript.length / 2) : -1;
    r.transcript.forEach((e, i) => {
      if (i === half) box.appendChild(el("p", "note", "[" + r.cut + " entries cut; " + r.events + " has them all]"));
      const item = el("div", "item " + e[0]);
      item.appendChild(el("b", null, e[1]));
      if (e[2]) item.appendChild(pre(e[2]));
      box.appendChild(item);
    });
    return box;
  }

  function facts(r) {
    return [r.status + (r.skip ? " (" + r.skip + ")" : ""), num(r.requests) + " requests",
      num(r.turns) + " user turns", num(r.tools) + " tool calls",
      num(r.input) + " input tokens (" + (r.hit === null ? "n/a" : (100 * r.hit).toFixed(1) + "%") + " cached)",
      num(r.output) + " output", "cost " + money(r.cost), secs(r.time)]
      .concat(r.retries || r.wait ? [num(r.retries) + " retries, " + secs(r.wait) + " waiting"] : [])
      .concat(r.redone ? ["redone " + num(r.redone[0]) + "x before: " + num(r.redone[1]) +
        " tokens, cost " + money(r.redone[2])] : [])
      .concat(r.branch ? ["branch " + r.branch] : []).join(" - ");
  }

  function details(summary, body, open) {
    const d = el("details");
    d.appendChild(el("summary", null, summary));
    d.appendChild(body);
    d.open = !!open;
    return d;
  }

  function runBody(r, full) {
    const box = el("div");
    box.appendChild(el("p", null, facts(r)));
    if (r.error) { box.appendChild(el("p", null, "Error:")); box.appendChild(pre(r.error)); }
    if (r.check) {
      box.appendChild(el("p", null, "Check " + r.check.command + " exited " + r.check.exit));
      if (r.check.tail) box.appendChild(pre(r.check.tail));
    }
    if (full) { box.appendChild(el("h4", null, "Tokens per request")); box.appendChild(tokenChart(r)); }
    if (r.inputs) {
      const input = el("div");
      ["Prompt", "Instructions", "Tool schemas", "AGENTS.md"].forEach((label, k) => {
        if (k >= r.inputs.length) return;
        input.appendChild(el("h4", null, label + " (" + r.inputs[k] + ")"));
        input.appendChild(pre(D.inputs[r.inputs[k]] || "(not in this page)"));
      });
      box.appendChild(details("Input: prompt, instructions, tool schemas, AGENTS.md", input, false));
    }
    box.appendChild(el("h4", null, "Final message"));
    box.appendChild(pre(r.final || "(none)"));
    box.appendChild(details("Transcript", transcript(r), full));
    const patch = el("div");
    if (r.patch !== null) patch.appendChild(pre(r.patch));
    if (r.patch_note) patch.appendChild(el("p", "note", r.patch_note));
    box.appendChild(details("Patch", patch, false));
    return box;
  }

  function showRun(i, scroll) {
    const r = RUNS[i];
    if (!r) return;
    selected = i;
    for (const tr of $("runs-table").tBodies[0].rows) tr.className = tr.dataset.run === String(i) ? "sel" : "";
    $("detail-head").textContent = "Run " + r.run;
    const box = el("div");
    const side = el("button", "link", "Show this task side by side");
    side.type = "button";
    side.addEventListener("click", () => { $("s-task").value = String(r.task); drawSide(); $("side").scrollIntoView(); });
    box.appendChild(el("p", null, "Task " + D.tasks[r.task] + " - " + colName(r) + " - repeat " + r.repeat + " "));
    box.lastChild.appendChild(side);
    box.appendChild(runBody(r, true));
    $("detail").replaceChildren(box);
    if (scroll) $("detail-head").scrollIntoView();
  }

  function drawSide() {
    const task = Number($("s-task").value);
    const by = $("s-by").value;
    const groups = new Map();
    for (const r of RUNS) {
      if (r.task !== task) continue;
      const k = by === "model" ? model(r) : by === "variant" ? (variant(r) === null ? "(no variant)" : variant(r)) : colName(r);
      if (!groups.has(k)) groups.set(k, []);
      groups.get(k).push(r);
    }
    const grid = $("side-grid");
    grid.replaceChildren();
    for (const [k, runs] of groups) {
      const col = el("div", "col");
      const passed = runs.filter((r) => r.verdict === "passed").length;
      const finished = runs.filter((r) => r.verdict === "passed" || r.verdict === "failed").length;
      col.appendChild(el("h3", null, k + " - " + passed + "/" + finished + " passed"));
      for (const r of runs) {
        const card = el("div", "card");
        const open = el("button", "link", r.run);
        open.type = "button";
        open.addEventListener("click", () => showRun(r.n, true));
        card.appendChild(open);
        card.appendChild(el("span", "v-" + r.verdict, " " + r.status));
        card.appendChild(runBody(r, false));
        col.appendChild(card);
      }
      grid.appendChild(col);
    }
  }

  function fromHash() {
    const h = location.hash.slice(1);
    let m = /^cell=(\d+)\.(\d+)$/.exec(h);
    if (m && D.tasks[Number(m[1])] !== undefined && D.cols[Number(m[2])]) {
      const c = D.cols[Number(m[2])];
      setFilters("", c[0], c[1] === null ? "\u0000" : c[1], m[1]);
      refresh();
      $("runs").scrollIntoView();
      return;
    }
    m = /^run=(\d+)$/.exec(h);
    if (m && RUNS[Number(m[1])]) { showRun(Number(m[1]), true); return; }
    m = /^side=(\d+)$/.exec(h);
    if (m && D.tasks[Number(m[1])] !== undefined) { $("s-task").value = m[1]; drawSide(); $("side").scrollIntoView(); }
  }

  setupFilters();
  setupTable();
  refresh();
  if (D.tasks.length) drawSide();
  $("viewer").hidden = false;
  window.addEventListener("hashchange", fromHash);
  fromHash();
  document.documentElement.dataset.ready = String(Math.round(performance.now()));
})();

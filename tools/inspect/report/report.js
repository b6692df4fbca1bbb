// The drawing code of the inspect report, shared by the self-contained report (inlined by
// tools/inspect/html_report.cpp) and the live lab (served as /report.js; the lab calls
// render() with each answer). A classic script: its functions are the page's globals.
"use strict";
// The inspection document on show; render() replaces it.
let data = null;
const $ = (id) => document.getElementById(id);
const tooltip = $("tooltip");
function el(tag, attrs, children) {
  const e = document.createElement(tag);
  for (const k in attrs || {}) {
    if (k === "text") e.textContent = attrs[k]; else if (k === "class") e.className = attrs[k]; else e.setAttribute(k, attrs[k]);
  }
  for (const c of children || []) e.appendChild(c);
  return e;
}
function showTip(ev, text) { tooltip.textContent = text; tooltip.style.display = "block"; tooltip.style.left = (ev.clientX + 12) + "px"; tooltip.style.top = (ev.clientY + 12) + "px"; }
function hideTip() { tooltip.style.display = "none"; }
function visible(t) {
  if (t === " ") return "\u2423"; if (t === "\n") return "\u21b5"; if (t === "\t") return "\u2192"; if (t === "\r") return "\u240d";
  if (t.length === 1 && t.charCodeAt(0) < 32) return "\\x" + t.charCodeAt(0).toString(16).padStart(2, "0");
  return t;
}
function fmt(x, d) { return x === null || x === undefined ? "\u2013" : Number(x).toFixed(d === undefined ? 3 : d); }
function head(l, h) { return l + "." + h; }

// Heatmaps arrive as {shape: [L, nh, R, C], lo: [...], hi: [...], b64}: bytes 0-255 between lo and hi per head.
function unpack(hm) {
  const raw = atob(hm.b64), bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  const [L, H, R, C] = hm.shape;
  return {L: L, H: H, R: R, C: C, get: (l, h) => bytes.subarray(((l * H) + h) * R * C, ((l * H) + h + 1) * R * C),
          value: (l, h, b) => hm.lo[l * H + h] + (hm.hi[l * H + h] - hm.lo[l * H + h]) * b / 255};
}
// White to deep blue.
const palette = new Uint8ClampedArray(256 * 3);
for (let v = 0; v < 256; v++) { const t = Math.pow(v / 255, 0.6); palette[3 * v] = 255 - 247 * t; palette[3 * v + 1] = 255 - 207 * t; palette[3 * v + 2] = 255 - 148 * t; }
function paint(canvas, bytes, R, C) {
  canvas.width = C; canvas.height = R;
  const ctx = canvas.getContext("2d"), img = ctx.createImageData(C, R);
  for (let i = 0; i < R * C; i++) { const v = bytes[i]; img.data[4 * i] = palette[3 * v]; img.data[4 * i + 1] = palette[3 * v + 1]; img.data[4 * i + 2] = palette[3 * v + 2]; img.data[4 * i + 3] = 255; }
  ctx.putImageData(img, 0, 0);
}

// A grid of L x nh thumbnails; clicking one opens it in the shared detail panel.
let selectedThumb = null;
function thumbGrid(container, maps, rowLabels, colLabels, kind) {
  container.style.gridTemplateColumns = "40px repeat(" + maps.H + ", 92px)";
  for (let l = 0; l < maps.L; l++) {
    container.appendChild(el("div", {class: "rowlabel", text: "L" + l}));
    for (let h = 0; h < maps.H; h++) {
      const classes = {attention: "head-thumb", snapshot: "snapshot-thumb"};
      const canvas = el("canvas", {class: classes[kind] || "prior-thumb", "data-layer": l, "data-head": h});
      paint(canvas, maps.get(l, h), maps.R, maps.C);
      const box = el("div", {class: "thumb", title: "layer " + l + ", head " + h}, [canvas, el("span", {text: "L" + l + " H" + h})]);
      box.addEventListener("click", () => {
        if (selectedThumb) selectedThumb.classList.remove("selected");
        selectedThumb = box; box.classList.add("selected");
        openDetail(maps, l, h, rowLabels, colLabels, kind);
      });
      container.appendChild(box);
    }
  }
}

function openDetail(maps, l, h, rowLabels, colLabels, kind) {
  const panel = $("head-detail");
  panel.hidden = false;
  const names = {attention: "attention pattern", snapshot: "attention pattern at step " + $("snapshot-step").textContent.replace("step ", ""), positions: "position prior", tokens: "token prior (QK scores)"};
  $("detail-title").textContent = "L" + l + " H" + h + " \u00b7 " + names[kind];
  panel.setAttribute("data-layer", l); panel.setAttribute("data-head", h); panel.setAttribute("data-kind", kind);
  const bytes = maps.get(l, h), R = maps.R, C = maps.C;
  // Cells of at least 9 px so every token label is legible; a long prompt scrolls.
  const cell = Math.max(9, Math.min(24, Math.floor(720 / Math.max(R, C))));
  const margin = 34;
  const canvas = $("detail-canvas"), ctx = canvas.getContext("2d");
  canvas.width = margin + C * cell; canvas.height = margin + R * cell;
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, canvas.width, canvas.height);
  for (let i = 0; i < R; i++) for (let j = 0; j < C; j++) {
    const v = bytes[i * C + j];
    ctx.fillStyle = "rgb(" + palette[3 * v] + "," + palette[3 * v + 1] + "," + palette[3 * v + 2] + ")";
    ctx.fillRect(margin + j * cell, margin + i * cell, cell, cell);
  }
  {  // token labels on both axes
    ctx.fillStyle = "#24292f"; ctx.font = Math.min(12, cell) + "px monospace"; ctx.textAlign = "center"; ctx.textBaseline = "middle";
    for (let i = 0; i < R; i++) ctx.fillText(visible(rowLabels[i]), margin / 2, margin + (i + 0.5) * cell);
    for (let j = 0; j < C; j++) ctx.fillText(visible(colLabels[j]), margin + (j + 0.5) * cell, margin / 2);
  }
  canvas.onmousemove = (ev) => {
    const r = canvas.getBoundingClientRect();
    const j = Math.floor((ev.clientX - r.left - margin) / cell), i = Math.floor((ev.clientY - r.top - margin) / cell);
    if (i < 0 || j < 0 || i >= R || j >= C) { hideTip(); return; }
    showTip(ev, visible(rowLabels[i]) + " (" + i + ") \u2192 " + visible(colLabels[j]) + " (" + j + "): " + fmt(maps.value(l, h, bytes[i * C + j]), 3));
  };
  canvas.onmouseleave = hideTip;
  // The token strip: hover token i to colour where it reads from (row i) and what reads from it (column i).
  const strip = $("detail-strip");
  strip.textContent = "";
  const square = R === C && rowLabels === colLabels;
  const spans = colLabels.map((t, j) => el("span", {class: "tok", text: visible(t), "data-index": j}));
  spans.forEach((s) => strip.appendChild(s));
  $("detail-hint").textContent = square ? "Hover a token: blue = where it reads from, orange = what reads from it." : "";
  if (!square) return;
  spans.forEach((s, i) => {
    s.addEventListener("mouseenter", () => {
      spans.forEach((o, j) => {
        const from = maps.value(l, h, bytes[i * C + j]), to = maps.value(l, h, bytes[j * C + i]);
        o.style.background = j <= i ? "rgba(9,105,218," + from + ")" : "rgba(251,143,68," + to + ")";
      });
      s.classList.add("focus");
    });
    s.addEventListener("mouseleave", () => { spans.forEach((o) => { o.style.background = ""; }); s.classList.remove("focus"); });
  });
}

// A table whose header sorts it; rows are arrays of cells {text, value}.
function sortableTable(table, headers, rows) {
  table.textContent = "";
  const thead = el("thead"), tr = el("tr"), tbody = el("tbody");
  let sortCol = -1, asc = true;
  headers.forEach((h, c) => {
    const th = el("th", {text: h, title: "sort by " + h});
    th.addEventListener("click", () => {
      asc = sortCol === c ? !asc : c === 0; sortCol = c;
      [...tr.children].forEach((x) => x.classList.remove("sorted-asc", "sorted-desc"));
      th.classList.add(asc ? "sorted-asc" : "sorted-desc");
      rows.sort((a, b) => { const x = a[c].value, y = b[c].value; const d = (x === null) - (y === null) || (x < y ? -1 : x > y ? 1 : 0); return asc ? d : -d; });
      render();
    });
    tr.appendChild(th);
  });
  thead.appendChild(tr); table.appendChild(thead); table.appendChild(tbody);
  function render() {
    tbody.textContent = "";
    for (const row of rows) tbody.appendChild(el("tr", {}, row.map((cell) => el("td", {text: cell.text, "data-value": cell.value === null ? "" : cell.value}))));
  }
  render();
}
const num = (v, d) => ({text: fmt(v, d), value: v === null || v === undefined ? null : v});

// ---- sections ----
function summary() {
  const m = data.model;
  $("summary").textContent = data.run + " \u00b7 step " + (data.step === null ? "?" : data.step) + " \u00b7 " + m.n_layer + " layers \u00d7 " + m.n_head + " heads, n_embd " + m.n_embd + ", block " + m.block_size + ", vocab " + m.vocab_size + ", " + m.pos_encoding + " positions" + (m.attn_only ? ", attention only" : "");
  for (const n of data.notes || []) $("notes").appendChild(el("li", {text: n}));
}

function attention() {
  if (!data.attention) { $("attention-section").hidden = true; return; }
  const maps = unpack(data.attention.patterns);
  thumbGrid($("attention-grid"), maps, data.attention.tokens, data.attention.tokens, "attention");
}

function heads() {
  if (!data.heads) { $("heads-section").hidden = true; return; }
  const s = data.heads.scores, p = data.heads.probe.scores, best = data.heads.strongest.previous_token, ind = data.heads.probe.strongest.induction;
  const lead = $("heads-lead");
  lead.appendChild(document.createTextNode("Strongest previous-token head: "));
  lead.appendChild(el("b", {id: "strongest-prev-head", text: head(best.layer, best.head)}));
  lead.appendChild(document.createTextNode(", score "));
  lead.appendChild(el("b", {id: "strongest-prev-score", text: fmt(best.score)}));
  lead.appendChild(document.createTextNode(". Strongest induction head on the probe: "));
  lead.appendChild(el("b", {id: "strongest-induction-head", text: head(ind.layer, ind.head)}));
  lead.appendChild(document.createTextNode(", score " + fmt(ind.score) + ". Probe loss " + fmt(data.heads.probe.loss_first_half) + " nats on the first half, " + fmt(data.heads.probe.loss_second_half) + " on the repeat. Scores on " + data.heads.windows + " windows of " + data.heads.length + " tokens from " + data.heads.source + "; the probe is " + data.heads.probe.sequences + " sequences of " + data.heads.probe.length / 2 + " random tokens repeated twice."));
  const rows = [];
  s.previous_token.forEach((row, l) => row.forEach((_, h) => rows.push([
    {text: head(l, h), value: l * 1000 + h}, num(s.previous_token[l][h]), num(s.self[l][h]), num(s.first_token[l][h]),
    num(s.duplicate_token[l][h]), num(s.induction[l][h]), num(s.entropy[l][h]), num(p.previous_token[l][h]), num(p.induction[l][h])])));
  sortableTable($("head-scores"), ["head", "previous token", "self", "first token", "duplicate token", "induction", "entropy (nats)", "probe: previous token", "probe: induction"], rows);
}

function ablation() {
  if (!data.ablation) { $("ablation-section").hidden = true; return; }
  const a = data.ablation;
  $("ablation-lead").textContent = "Change in loss when one head's output (hook_z) is zeroed or replaced by its mean, on " + a.windows + " windows from " + a.source + " (loss " + fmt(a.loss, 4) + ") and on the probe's repeat (loss " + fmt(a.probe_loss, 4) + "). The " + a.exact_heads + " heads attribution ranks first were ablated exactly; \u201c~\u201d marks the others' attribution estimates (Spearman of estimate against exact, zero-ablation: " + fmt(a.agreement.zero.spearman) + ").";
  // Heads not run exactly show attribution's first-order estimate, marked "~".
  const cell = (r, k) => r.exact ? num(r[k], 4) : {text: "~" + fmt(r.estimate[k], 4), value: r.estimate[k]};
  const rows = a.heads.map((r) => [{text: head(r.layer, r.head), value: r.layer * 1000 + r.head}, cell(r, "zero"), cell(r, "mean"), cell(r, "probe_zero"), cell(r, "probe_mean")]);
  sortableTable($("ablation"), ["head", "\u0394 loss, zeroed", "\u0394 loss, mean", "\u0394 probe loss, zeroed", "\u0394 probe loss, mean"], rows);
}

function priors() {
  if (!data.priors) { $("priors-section").hidden = true; return; }
  const pr = data.priors;
  if (pr.positions) {
    const labels = [...Array(pr.positions.length).keys()].map(String);
    thumbGrid($("prior-positions-grid"), unpack(pr.positions.patterns), labels, labels, "positions");
  } else $("prior-positions-grid").textContent = "No positions (pos_encoding = none).";
  if (pr.tokens) thumbGrid($("prior-tokens-grid"), unpack(pr.tokens.scores), data.vocab, data.vocab, "tokens");
  else $("prior-tokens-grid").textContent = "The vocabulary is too large for token-to-token tables.";
  const rows = [];
  pr.ov.copying.forEach((row, l) => row.forEach((_, h) => rows.push([{text: head(l, h), value: l * 1000 + h},
    num(pr.positions ? pr.positions.previous_token[l][h] : null), num(pr.ov.copying[l][h]), num(pr.ov.top1[l][h])])));
  sortableTable($("priors-table"), ["head", "position prior: previous token", "OV copying", "OV top-1"], rows);
}

function logitLens() {
  if (!data.logit_lens) { $("lens-section").hidden = true; return; }
  const lens = data.logit_lens, table = $("logit-lens");
  const header = el("tr", {}, [el("th", {text: "stage"})].concat(lens.tokens.map((t) => el("th", {text: visible(t)}))));
  table.appendChild(el("thead", {}, [header]));
  const body = el("tbody");
  for (const stage of lens.stages) {
    const cells = stage.top.map((top) => {
      const td = el("td", {text: visible(top[0].token)});
      td.style.background = "rgba(9,105,218," + (0.7 * top[0].p) + ")";
      td.addEventListener("mousemove", (ev) => showTip(ev, top.map((t) => visible(t.token) + " " + fmt(t.p)).join("   ")));
      td.addEventListener("mouseleave", hideTip);
      return td;
    });
    body.appendChild(el("tr", {}, [el("td", {text: stage.name})].concat(cells)));
  }
  table.appendChild(body);
}

// A line chart as SVG: series [{name, points: [[x, y]], color, width}].
// xTick: how an x value is labelled (default: rounded).
// xTicks: the x values to label (default: five, evenly spaced).
function lineChart(title, series, yLabel, xTick, xLabel, xTicks) {
  const W = 520, H = 260, left = 48, right = 12, top = 24, bottom = 32;
  const all = series.flatMap((s) => s.points);
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("class", "chart");
  const add = (tag, attrs) => { const e = document.createElementNS("http://www.w3.org/2000/svg", tag); for (const k in attrs) e.setAttribute(k, attrs[k]); svg.appendChild(e); return e; };
  add("text", {x: left, y: 14}).textContent = title;
  if (all.length === 0) { add("text", {x: left, y: H / 2}).textContent = "no data"; return svg; }
  let x0 = Math.min(...all.map((p) => p[0])), x1 = Math.max(...all.map((p) => p[0]));
  let y0 = Math.min(...all.map((p) => p[1])), y1 = Math.max(...all.map((p) => p[1]));
  if (x1 === x0) x1 = x0 + 1; if (y1 === y0) y1 = y0 + 1;
  const X = (x) => left + (W - left - right) * (x - x0) / (x1 - x0), Y = (y) => H - bottom - (H - top - bottom) * (y - y0) / (y1 - y0);
  add("line", {x1: left, y1: H - bottom, x2: W - right, y2: H - bottom, stroke: "#8c959f"});
  add("line", {x1: left, y1: top, x2: left, y2: H - bottom, stroke: "#8c959f"});
  for (let k = 0; k <= 4; k++) add("text", {x: 4, y: Y(y0 + (y1 - y0) * k / 4) + 4}).textContent = (y0 + (y1 - y0) * k / 4).toFixed(2);
  const ticks = xTicks || [0, 1, 2, 3, 4].map((k) => x0 + (x1 - x0) * k / 4);
  ticks.forEach((x, k) => add("text", {x: X(x), y: H - 12, "text-anchor": k === 0 ? "start" : k === ticks.length - 1 ? "end" : "middle"}).textContent = (xTick || Math.round)(x));
  add("text", {x: W - right, y: H - 2, "text-anchor": "end"}).textContent = xLabel || "step";
  for (const s of series) {
    const d = s.points.map((p, i) => (i ? "L" : "M") + X(p[0]).toFixed(1) + " " + Y(p[1]).toFixed(1)).join(" ");
    const path = add("path", {d: d, fill: "none", stroke: s.color, "stroke-width": s.width || 1.5});
    const t = document.createElementNS("http://www.w3.org/2000/svg", "title"); t.textContent = s.name; path.appendChild(t);
  }
  return svg;
}
function chartBox(svg, series) {
  const legend = el("div", {class: "legend"}, series.filter((s) => s.legend !== false).map((s) => { const sp = el("span", {text: "\u25a0 " + s.name}); sp.style.color = s.color; return sp; }));
  return el("div", {}, [svg, legend]);
}
const colors = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#1b7c83", "#e16f24", "#6e7781"];

// "1.0 (score 0.53, half of it at step 2750)": a head of the phase change.
function formedHead(h) {
  return head(h.layer, h.head) + " (score " + fmt(h.score) + (h.half_step < 0 ? ", at half of it from the first reading)" : ", half of it at step " + h.half_step + ")");
}

function training() {
  const box = $("training-charts");
  if (!data.training) { box.textContent = "No metrics.jsonl in this run: no training curves."; return; }
  const t = data.training;
  const loss = [{name: "train loss (logged steps)", points: t.train.map((r) => [r[0], r[1]]), color: "#8c959f", width: 1},
                {name: "train loss (estimate)", points: t.eval.map((r) => [r[0], r[2]]), color: colors[0], width: 2},
                {name: "val loss", points: t.eval.map((r) => [r[0], r[1]]), color: colors[1], width: 2}];
  box.appendChild(chartBox(lineChart("Loss (nats per token)", loss), loss));
  if (t.probe.length === 0) return;
  const pc = t.phase_change;
  $("phase-change").textContent = pc
    ? "Phase change at step " + pc.step + ": the loss on the probe's repeat fell " + fmt(pc.drop) + " nats in " + (pc.end - pc.start) + " steps (" + pc.start + " to " + pc.end + "), as previous-token head " + formedHead(pc.previous_token) + " and induction head " + formedHead(pc.induction) + " formed. Found during training, at the reading that completed it."
    : "No phase change: the loss on the probe's repeat never fell a nat below the first half's and settled (" + t.probe.length + " readings, to step " + t.probe[t.probe.length - 1].step + ").";
  for (const [key, title] of [["previous_token", "Previous-token score on the probe, per head"], ["induction", "Induction score on the probe, per head"]]) {
    const final = t.probe[t.probe.length - 1][key], series = [];
    const ranked = [];
    final.forEach((row, l) => row.forEach((v, h) => ranked.push([v, l, h])));
    ranked.sort((a, b) => b[0] - a[0]);
    ranked.forEach(([v, l, h], rank) => series.push({name: "head " + head(l, h), legend: rank < 4, color: rank < 4 ? colors[rank] : "#d0d7de", width: rank < 4 ? 2 : 1,
      points: t.probe.map((r) => [r.step, r[key][l][h]])}));
    series.reverse();  // the strongest drawn last, on top
    box.appendChild(chartBox(lineChart(title, series), series.slice().reverse()));
  }
  const probeLoss = [{name: "probe loss, first half", points: t.probe.map((r) => [r.step, r.loss_first_half]), color: colors[0], width: 2},
                     {name: "probe loss, repeat (induction loss)", points: t.probe.map((r) => [r.step, r.loss_second_half]), color: colors[1], width: 2}];
  if (pc) {  // the drop's start and end, as two rules across the chart
    const ys = probeLoss.flatMap((s) => s.points.map((p) => p[1])), lo = Math.min(...ys), hi = Math.max(...ys);
    for (const x of [pc.start, pc.end])
      probeLoss.push({name: "phase change (start, end)", points: [[x, lo], [x, hi]], color: "#6e7781", width: 1, legend: x === pc.start});
  }
  box.appendChild(chartBox(lineChart("Induction probe loss (nats)", probeLoss), probeLoss));
}

// A table of numbers coloured by sign and size: blue positive, red negative, full colour at
// `scale` (default: the largest |value|). values[r][c], null shown as a dash.
function matrixTable(table, corner, rowLabels, colLabels, values, scale, decimals) {
  table.textContent = "";
  const flat = values.flat().filter((v) => v !== null);
  const s = scale || Math.max(1e-12, ...flat.map(Math.abs));
  table.appendChild(el("thead", {}, [el("tr", {}, [el("th", {text: corner})].concat(colLabels.map((c) => el("th", {text: c}))))]));
  const body = el("tbody");
  values.forEach((row, r) => {
    const cells = row.map((v) => {
      const td = el("td", {text: fmt(v, decimals === undefined ? 2 : decimals), "data-value": v === null ? "" : v});
      if (v !== null) td.style.background = (v >= 0 ? "rgba(9,105,218," : "rgba(207,34,46,") + Math.min(1, Math.abs(v) / s) * 0.75 + ")";
      return td;
    });
    body.appendChild(el("tr", {}, [el("td", {text: rowLabels[r]})].concat(cells)));
  });
  table.appendChild(body);
}
const headLabels = (L, H) => [...Array(L * H).keys()].map((i) => head(Math.floor(i / H), i % H));

function composition() {
  if (!data.composition) { $("composition-section").hidden = true; return; }
  const c = data.composition, L = data.model.n_layer, H = data.model.n_head;
  const labels = headLabels(L, H);
  const show = (mode) => {
    [...$("composition-modes").children].forEach((b) => b.classList.toggle("active", b.textContent === mode.toUpperCase()));
    const m = c[mode].flat(3), rows = [];  // [A][B] over the n = L H heads
    for (let a = 0; a < L * H; a++) rows.push(m.slice(a * L * H, (a + 1) * L * H));
    const best = c.strongest[mode];
    $("composition-lead").textContent = "";
    $("composition-lead").appendChild(document.createTextNode("Strongest " + mode.toUpperCase() + "-composition: "));
    $("composition-lead").appendChild(el("b", {id: "composition-strongest", text: head(best.from.layer, best.from.head) + " → " + head(best.to.layer, best.to.head)}));
    $("composition-lead").appendChild(document.createTextNode(", score " + fmt(best.score)));
    matrixTable($("composition-table"), "A \\ B", labels, labels, rows, null, 3);
    compositionGraph(rows, L, H, best.score);
  };
  for (const mode of ["q", "k", "v"]) {
    const b = el("button", {text: mode.toUpperCase(), "data-mode": mode});
    b.addEventListener("click", () => show(mode));
    $("composition-modes").appendChild(b);
  }
  show("k");
}
// Heads as dots in one column per layer; an edge from A to a later B for each pair scoring
// at least a fifth of the strongest, its opacity the score over the strongest.
function compositionGraph(rows, L, H, top) {
  const W = 160 * L + 40, Hgt = 28 * H + 40, box = $("composition-graph");
  box.textContent = "";
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("width", W); svg.setAttribute("height", Hgt);
  const add = (tag, attrs) => { const e = document.createElementNS("http://www.w3.org/2000/svg", tag); for (const k in attrs) e.setAttribute(k, attrs[k]); svg.appendChild(e); return e; };
  const X = (l) => 70 + l * 160, Y = (h) => 30 + h * 28;
  for (let a = 0; a < L * H; a++) for (let b = 0; b < L * H; b++) {
    const v = rows[a][b];
    if (top > 0 && v >= top / 5) add("line", {class: "edge", x1: X(Math.floor(a / H)), y1: Y(a % H), x2: X(Math.floor(b / H)), y2: Y(b % H), stroke: "#0969da", "stroke-width": 1 + 3 * v / top, "stroke-opacity": v / top});
  }
  for (let l = 0; l < L; l++) {
    add("text", {x: X(l) - 8, y: 14}).textContent = "L" + l;
    for (let h = 0; h < H; h++) { add("circle", {cx: X(l), cy: Y(h), r: 6, fill: "#fff", stroke: "#24292f"}); add("text", {x: X(l) - 10, y: Y(h) + 4, "text-anchor": "end"}).textContent = head(l, h); }
  }
  box.appendChild(svg);
}

function geometry() {
  if (!data.geometry) { $("geometry-section").hidden = true; return; }
  const g = data.geometry, p = g.positions, t = g.tokens;
  let lead = p.kind + " positions. ";
  if (p.shift_residual) lead += "PE(pos + k) from PE(pos) by the best linear map (held-out residual): " + p.shift_residual.map((r, k) => "k=" + (k + 1) + " " + fmt(r, 4)).join(", ") + ". ";
  if (p.kind === "rope") lead += "For rope the map is the rotation's kernel: the mean of cos((i - j) θ) over its frequencies. ";
  lead += "The map holds " + fmt(100 * t.explained[0], 0) + "% + " + fmt(100 * t.explained[1], 0) + "% of the embeddings' variance.";
  $("geometry-lead").textContent = lead;
  if (p.similarity) {  // -1..1 onto the palette's 0..255
    const P = p.similarity.length, bytes = new Uint8Array(P * P);
    p.similarity.forEach((row, i) => row.forEach((v, j) => { bytes[i * P + j] = Math.round(255 * (v + 1) / 2); }));
    paint($("position-similarity"), bytes, P, P);
  } else $("position-similarity").hidden = true;
  if (p.distance_bias) {  // one chart per layer: each head's bias against the distance
    p.distance_bias.forEach((layer, l) => {
      const series = layer.map((row, h) => ({name: "head " + head(l, h), color: colors[h % colors.length], points: row.map((v, d) => [d, v])}));
      const svg = lineChart("Layer " + l + ": score bias b(d) at distance d", series, null, null, "distance i - j");
      svg.classList.add("distance-bias-chart");
      $("distance-bias-charts").appendChild(chartBox(svg, series));
    });
  }
  if (data.analogy) {
    const a = data.analogy, e = $("analogy");
    e.hidden = false;
    e.textContent = visible(a.a) + " is to " + visible(a.b) + " as " + visible(a.c) + " is to: " + a.nearest.map((n, i) => visible(n) + " (" + fmt(a.similarity[i], 3) + ")").join(", ");
  }
  const W = 520, H = 420, pad = 20, xs = t.map.map((q) => q[0]), ys = t.map.map((q) => q[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("id", "embedding-svg");
  t.map.forEach((q, i) => {
    const e = document.createElementNS("http://www.w3.org/2000/svg", "text");
    e.setAttribute("x", pad + (W - 2 * pad) * (q[0] - x0) / Math.max(1e-12, x1 - x0));
    e.setAttribute("y", H - pad - (H - 2 * pad) * (q[1] - y0) / Math.max(1e-12, y1 - y0));
    e.setAttribute("class", "embedding-label"); e.setAttribute("text-anchor", "middle");
    e.textContent = visible(data.vocab[i]);
    svg.appendChild(e);
  });
  $("embedding-map").appendChild(svg);
  const rows = t.neighbours.map((list, i) => [{text: visible(data.vocab[i]), value: i}].concat(list.map((n, j) => ({text: visible(n) + " " + fmt(t.similarity[i][j], 2), value: t.similarity[i][j]}))));
  sortableTable($("neighbours"), ["token"].concat(t.neighbours[0].map((_, j) => "neighbour " + (j + 1))), rows);
}

function positionLoss() {
  if (!data.position_loss) { $("position-loss-section").hidden = true; return; }
  const p = data.position_loss, ys = p.per_position;
  $("position-loss-lead").textContent = "The mean next-token loss at each position of " + p.windows + " windows of " + p.context + " tokens from " + p.source +
    "; the model was trained on windows of " + p.block_size + " (the grey line). Past it, the curve shows how the positions extrapolate: flat or falling where more context still helps, rising where the model stops coping.";
  const lo = Math.min(...ys.filter((v) => v !== null)), hi = Math.max(...ys.filter((v) => v !== null));
  const series = [{name: "per position", points: ys.map((v, t) => [t, v]), color: "#d0d7de", width: 1},
                  {name: "bucket mean", points: p.bucket_start.map((t, k) => [t, p.bucket_loss[k]]), color: colors[0], width: 2},
                  {name: "block_size", points: [[p.block_size, lo], [p.block_size, hi]], color: "#8c959f", width: 1}];
  const svg = lineChart("Loss (nats) at each position", series, null, null, "position");
  svg.setAttribute("id", "position-loss-svg");
  $("position-loss-chart").appendChild(chartBox(svg, series));
}

function drift() {
  if (!data.context_drift) { $("drift-section").hidden = true; return; }
  const d = data.context_drift;
  $("drift-lead").textContent = "Every occurrence of " + visible(d.token) + " (" + d.occurrences + " in " + d.tokens + " tokens of " + d.source +
    "), as a vector at each stage of the residual stream: the mean cosine similarity of all pairs. 1 at the embedding; it falls as the blocks read each occurrence's context in. The baseline is the same mean over all positions' vectors, whatever their token.";
  const series = [{name: visible(d.token) + ": its occurrences", points: d.similarity.map((v, s) => [s, v]), color: colors[0], width: 2},
                  {name: "baseline: any two positions", points: d.baseline.map((v, s) => [s, v]), color: "#8c959f", width: 1.5}];
  const svg = lineChart("Mean pairwise cosine similarity per stage", series, null, (x) => d.stages[x].replace(/blocks\.(\d+)\.hook_resid_(pre|post)/, "$2 $1"), "stage", d.stages.map((_, s) => s));
  svg.setAttribute("id", "drift-svg");
  $("drift-chart").appendChild(chartBox(svg, series));
}

function circuits() {
  if (!data.circuits) { $("circuits-section").hidden = true; return; }
  const c = data.circuits, rows = [];
  const tokens = (list) => list.map((t) => visible(t.token)).join(" ");
  c.ov.forEach((layer, l) => layer.forEach((dirs, h) => {
    const ov = dirs[0], qk = c.qk[l][h][0];
    rows.push([{text: head(l, h), value: l * 1000 + h}, num(ov.share, 2), {text: tokens(ov.reads), value: tokens(ov.reads)}, {text: tokens(ov.writes), value: tokens(ov.writes)},
               num(qk.share, 2), {text: tokens(qk.queries), value: tokens(qk.queries)}, {text: tokens(qk.keys), value: tokens(qk.keys)}]);
  }));
  sortableTable($("circuits-table"), ["head", "OV share", "OV reads", "OV writes", "QK share", "QK queries", "QK keys"], rows);
}

function attribution() {
  if (!data.attribution) { $("attribution-section").hidden = true; return; }
  const a = data.attribution, L = data.model.n_layer, H = data.model.n_head, P = a.targets.length;
  const cols = a.targets.map((t, i) => visible(a.tokens[i]) + "→" + visible(t)).concat(["total"]);
  const rows = [], labels = [];
  const withTotal = (series) => series.concat([series.reduce((x, y) => x + (y === null ? 0 : y), 0)]);
  labels.push("embed"); rows.push(withTotal(a.embed));
  for (let l = 0; l < L; l++) {
    for (let h = 0; h < H; h++) { labels.push("head " + head(l, h)); rows.push(withTotal(a.heads.map((p) => p[l][h]))); }
    if (a.mlps_total[l] !== null) { labels.push("mlp " + l); rows.push(withTotal(a.mlps.map((p) => p[l]))); }
  }
  labels.push("biases"); rows.push(withTotal(a.biases));
  labels.push("logit"); rows.push(withTotal(a.logits));
  const scale = Math.max(1e-12, ...rows.slice(0, -1).flatMap((r) => r.slice(0, P)).map(Math.abs));
  matrixTable($("attribution-table"), "part", labels, cols, rows, scale, 2);
}

function patching() {
  if (!data.patching) { $("patching-section").hidden = true; return; }
  const p = data.patching, L = data.model.n_layer, H = data.model.n_head;
  $("patching-lead").textContent = "The corrupted text with one activation from the clean run; the fraction of the logit difference restored between the clean answer “" + visible(p.clean_answer) + "” and the corrupted answer “" + visible(p.corrupt_answer) + "” after token " + p.position + " (0: the corrupted run, logit difference " + fmt(p.corrupt_logit_diff) + "; 1: the clean run, " + fmt(p.clean_logit_diff) + ").";
  const layers = [...Array(L).keys()].map((l) => "L" + l);
  matrixTable($("patching-heads"), "layer \\ head", layers, [...Array(H).keys()].map(String), p.heads, 1, 3);
  matrixTable($("patching-layers"), "layer", layers, ["attn_out", "mlp_out"], layers.map((_, l) => [p.attn_out[l], p.mlp_out[l]]), 1, 3);
  const positions = p.resid_pre[0].map((_, t) => t + " " + visible(p.clean_tokens[t]) + (p.clean_tokens[t] === p.corrupt_tokens[t] ? "" : "/" + visible(p.corrupt_tokens[t])));
  matrixTable($("patching-resid"), "layer \\ position", layers, positions, p.resid_pre, 1, 2);
}

function snapshots() {
  if (!data.snapshots) { $("snapshots-section").hidden = true; return; }
  const sn = data.snapshots, S = sn.steps.length, slider = $("snapshot-slider");
  slider.max = S - 1;
  const hasPositions = sn.position_patterns.length === S;
  if (!hasPositions) { $("snapshot-positions-title").hidden = true; }
  const positionLabels = hasPositions ? [...Array(sn.position_patterns[0].shape[2]).keys()].map(String) : [];
  const show = (i) => {
    slider.value = i;
    $("snapshot-step").textContent = "step " + sn.steps[i];
    $("snapshot-step").setAttribute("data-step", sn.steps[i]);
    for (const id of ["snapshot-text-grid", "snapshot-probe-grid", "snapshot-positions-grid"]) $(id).textContent = "";
    thumbGrid($("snapshot-text-grid"), unpack(sn.text_patterns[i]), sn.text_tokens, sn.text_tokens, "snapshot");
    thumbGrid($("snapshot-probe-grid"), unpack(sn.probe_patterns[i]), sn.probe_tokens, sn.probe_tokens, "snapshot");
    if (hasPositions) thumbGrid($("snapshot-positions-grid"), unpack(sn.position_patterns[i]), positionLabels, positionLabels, "positions");
  };
  slider.addEventListener("input", () => show(Number(slider.value)));
  show(S - 1);
  // Scores over log10(step + 1): the strongest four heads of the last snapshot in colour.
  const box = $("snapshot-charts");
  for (const [key, title] of [["previous_token", "Previous-token score"], ["induction", "Induction score (probe)"], ["mean_distance", "Mean attention distance"], ["entropy", "Entropy (nats)"], ["ov_copying", "OV copying"]]) {
    const series = [], last = sn.scores[key][S - 1], ranked = [];
    last.forEach((row, l) => row.forEach((v, h) => ranked.push([v, l, h])));
    ranked.sort((a, b) => b[0] - a[0]);
    ranked.forEach(([v, l, h], rank) => series.push({name: "head " + head(l, h), legend: rank < 4, color: rank < 4 ? colors[rank] : "#d0d7de", width: rank < 4 ? 2 : 1,
      points: sn.steps.map((st, i) => [Math.log10(st + 1), sn.scores[key][i][l][h]])}));
    series.reverse();
    const svg = lineChart(title, series, null, (x) => Math.round(Math.pow(10, x) - 1));
    svg.classList.add("snapshot-chart");
    box.appendChild(chartBox(svg, series.slice().reverse()));
  }
  const rows = [];
  sn.formed.previous_token.forEach((row, l) => row.forEach((_, h) => rows.push([{text: head(l, h), value: l * 1000 + h},
    num(sn.formed.previous_token[l][h], 0), num(sn.scores.previous_token[S - 1][l][h]), num(sn.formed.induction[l][h], 0), num(sn.scores.induction[S - 1][l][h]),
    num(sn.scores.mean_distance[S - 1][l][h], 2)])));
  sortableTable($("formation"), ["head", "previous token: formed at step", "last score", "induction: formed at step", "last score", "mean distance"], rows);
}

// Draws every section of `doc` (an inspect JSON document, heatmaps packed), from the
// pristine markup: the lab calls it again for each new answer.
let pristine = null;
// An SAE's features: a table sorted by frequency (or another key), filtered by a token they
// fire on; a feature's detail shows its top contexts, heads, promoted and suppressed tokens
// and its activation histogram.
function features() {
  if (!data.features) { $("features-section").hidden = true; return; }
  const F = data.features, m = F.metrics || {}, layer = F.hook.startsWith("blocks.") ? parseInt(F.hook.split(".")[1]) : null;
  const induction = F.features.filter((f) => f.label === "induction");
  $("features-lead").textContent = F.width + " features (k " + F.k + ") on " + F.hook + " (" + F.d_in + " numbers), from " + F.sae + ". " +
    (m.explained_variance !== undefined ? "Explained variance " + fmt(m.explained_variance, 4) + ", L0 " + fmt(m.l0, 2) + ", dead " + fmt(m.dead_fraction, 4) + ", CE loss recovered " + fmt(m.ce_loss_recovered, 4) + " (clean " + fmt(m.ce_loss_clean, 4) + ", spliced " + fmt(m.ce_loss_spliced, 4) + ", zero-ablated " + fmt(m.ce_loss_zero_ablated, 4) + "). " : "") +
    "Read on " + F.positions + " tokens of " + F.source + ": " + F.features.length + " fired, " + F.silent.length + " never did. " +
    (induction.length ? induction.length + " induction-like (at least half of its activation where the token after the previous occurrence of the current token is one token A, which it promotes most): " + induction.slice(0, 12).map((f) => "#" + f.index + " (" + visible(f.after_previous) + ")").join(", ") + "." : "No feature is induction-like.") +
    " The token repeats at " + fmt(100 * F.repeat_rate, 1) + "% of positions, and the repeat continues at " + fmt(100 * F.continues_rate, 1) + "%.";
  const keys = {frequency: (f) => -f.firings, max: (f) => -f.max_activation, continues: (f) => -f.after_previous_share, index: (f) => f.index};
  const table = $("features-table");
  function topHead(f) {
    if (!f.head_shares.length) return "\u2013";
    let best = 0; f.head_shares.forEach((s, h) => { if (s > f.head_shares[best]) best = h; });
    return head(layer, best) + " " + fmt(100 * f.head_shares[best], 0) + "%";
  }
  function draw() {
    const q = $("features-search").value;
    const list = F.features.filter((f) => !q || f.fires_on.some(([t]) => t === q || visible(t) === q || t.trim() === q.trim() && q.trim() !== ""));
    list.sort((a, b) => keys[$("features-sort").value](a) - keys[$("features-sort").value](b));
    $("features-count").textContent = q ? list.length + " fire on it" : "";
    table.textContent = "";
    table.appendChild(el("tr", {}, ["feature", "frequency", "max", "fires on", "top head", "promotes", "suppresses", "label"].map((h) => el("th", {text: h}))));
    for (const f of list.slice(0, 400)) {
      const row = el("tr", {"data-feature": f.index}, [String(f.index), fmt(f.frequency, 4), fmt(f.max_activation, 2),
        f.fires_on.map(([t]) => visible(t)).join(" "), topHead(f), f.promoted.slice(0, 3).map(([t]) => visible(t)).join(" "),
        f.suppressed.slice(0, 3).map(([t]) => visible(t)).join(" "), featureLabel(f)].map((c) => el("td", {text: c})));
      if (f.label) row.lastChild.className = "label-" + f.label;
      row.addEventListener("click", () => { [...table.querySelectorAll("tr.selected")].forEach((r) => r.classList.remove("selected")); row.classList.add("selected"); featureDetail(f, layer); });
      table.appendChild(row);
    }
  }
  $("features-sort").onchange = draw; $("features-search").oninput = draw;
  draw();
}

function featureLabel(f) {
  return f.label === "induction" ? "induction: after the previous occurrence comes " + visible(f.after_previous) : (f.label || "");
}

function featureDetail(f, layer) {
  const F = data.features, panel = $("feature-detail");
  panel.hidden = false; panel.textContent = ""; panel.setAttribute("data-feature", f.index);
  panel.appendChild(el("h3", {text: "Feature " + f.index + (f.label ? " \u00b7 " + featureLabel(f) : "") + " \u00b7 fires on " + fmt(100 * f.frequency, 2) + "% of tokens, mean " + fmt(f.mean_activation, 3) + ", max " + fmt(f.max_activation, 3)}));
  panel.appendChild(el("p", {class: "muted", text: "Of its activation: " + fmt(100 * f.repeat_share, 1) + "% where the token occurred earlier in the window, " + fmt(100 * f.continues_share, 1) + "% where the next token is the one that followed that occurrence (" + fmt(100 * F.continues_rate, 1) + "% of all positions); " + (f.after_previous === null ? "none on a repeat." : fmt(100 * f.after_previous_share, 1) + "% where the token after the previous occurrence is " + visible(f.after_previous) + ".")}));
  panel.appendChild(el("h4", {text: "Top contexts (the token it fires on outlined; the activation first)"}));
  for (const [w, t, a] of f.top) {
    const tokens = F.windows[w], line = el("div", {class: "context"});
    line.appendChild(el("b", {text: fmt(a, 3) + "  "}));
    for (let i = Math.max(0, t - 16); i <= Math.min(tokens.length - 1, t + 4); i++) {
      const span = el("span", {class: "tok" + (i === t ? " hot" : ""), text: visible(tokens[i])});
      if (i === t) span.style.background = "rgba(9,105,218," + (0.2 + 0.6 * a / f.max_activation) + ")";
      line.appendChild(span);
    }
    panel.appendChild(line);
  }
  const cols = el("div", {class: "charts"});
  if (f.head_shares.length) {
    const t = el("table", {class: "feature-heads"});
    t.appendChild(el("tr", {}, [el("th", {text: "head"}), el("th", {text: "share of its direction"})]));
    f.head_shares.forEach((s, h) => t.appendChild(el("tr", {}, [el("td", {text: head(layer, h)}), el("td", {text: fmt(100 * s, 1) + "%"})])));
    cols.appendChild(el("div", {}, [el("h4", {text: "Heads that write it"}), t]));
  }
  if (f.promoted.length) {
    const t = el("table", {class: "feature-tokens"});
    t.appendChild(el("tr", {}, ["promotes", "logit", "suppresses", "logit"].map((h) => el("th", {text: h}))));
    f.promoted.forEach(([tok, v], i) => t.appendChild(el("tr", {}, [visible(tok), fmt(v, 3), visible(f.suppressed[i][0]), fmt(f.suppressed[i][1], 3)].map((c) => el("td", {text: c})))));
    cols.appendChild(el("div", {}, [el("h4", {text: "Through W_O and the unembedding"}), t]));
  }
  {  // the histogram of its activations: bins over (0, max]
    const W = 320, H = 120, n = f.histogram.length, top = Math.max(...f.histogram, 1);
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("width", W); svg.setAttribute("height", H + 16); svg.setAttribute("class", "feature-histogram");
    f.histogram.forEach((c, i) => {
      const r = document.createElementNS(svg.namespaceURI, "rect"), h = H * c / top;
      r.setAttribute("x", i * W / n); r.setAttribute("width", W / n - 1); r.setAttribute("y", H - h); r.setAttribute("height", h); r.setAttribute("fill", "#0969da");
      const title = document.createElementNS(svg.namespaceURI, "title"); title.textContent = fmt(i * f.max_activation / n, 2) + "\u2013" + fmt((i + 1) * f.max_activation / n, 2) + ": " + c;
      r.appendChild(title); svg.appendChild(r);
    });
    const label = document.createElementNS(svg.namespaceURI, "text"); label.setAttribute("x", 0); label.setAttribute("y", H + 13); label.textContent = "0 \u2192 " + fmt(f.max_activation, 2) + " (" + f.firings + " firings)";
    svg.appendChild(label);
    cols.appendChild(el("div", {}, [el("h4", {text: "Activation histogram"}), svg]));
  }
  panel.appendChild(cols);
}

function render(doc) {
  const main = $("report");
  if (pristine === null) pristine = main.innerHTML; else main.innerHTML = pristine;
  selectedThumb = null;
  data = doc;
  const started = performance.now();
  summary(); attention(); heads(); ablation(); priors(); logitLens(); geometry(); positionLoss(); drift(); composition(); circuits(); attribution(); patching(); snapshots(); features(); training();
  document.body.setAttribute("data-render-ms", (performance.now() - started).toFixed(0));
}

const inlined = JSON.parse($("tinylm-data").textContent);
if (inlined) {
  render(inlined);
  document.body.setAttribute("data-ready-ms", performance.now().toFixed(0));  // since navigation
  document.body.setAttribute("data-ready", "1");
}

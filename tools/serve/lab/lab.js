// The live lab (tinylm serve): the inspect report's page, driven by the API. Its drawing
// is the report's own (report.js, inlined in the page: render(), unpack(), paint(), el(),
// visible(), fmt()); this module asks the server, merges the answers into one inspect
// document, renders it, and adds what only a live page can: a prompt box, hovering a token
// to light up where it reads in every head, clicking a head to ablate it, patching, streamed
// sampling, and following a run while it trains. The API: docs/SERVE.md.
/* global render, unpack, paint, el, visible, fmt, head, data */

const $ = (id) => document.getElementById(id);

// A GET of the API as JSON; a refusal throws its {"error", "where"}.
async function api(path, params) {
  const response = await fetch(path + "?" + new URLSearchParams(params));
  const body = await response.json();
  if (!response.ok) throw new Error(body.error + " (" + body.where + ")");
  return body;
}

const state = {
  run: null,
  ablated: new Set(),   // "L.H"
  views: {},            // the latest answer of each request, merged by show()
  baseline: null,       // the prompt's lens without ablation, to compare with
  formed: null,         // snapshots.formed as last seen, to tell when a head forms
  announced: [],        // formation messages, newest last
};

const style = document.createElement("style");
style.textContent = `
  #lab-controls { background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 12px; margin: 8px 0; }
  #lab-controls .row { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin: 4px 0; }
  #lab-prompt { flex: 1; min-width: 320px; font: 13px ui-monospace, monospace; }
  #lab-controls input[type=number] { width: 70px; }
  #lab-controls input.text { width: 280px; }
  #lab-tokens .tok { cursor: default; }
  #lab-tokens .tok.focus { background: #ffebe9; }
  #lab-error:empty, #lab-formed:empty { display: none; }
  #lab-error { background: #ffebe9; border: 1px solid #ff8182; padding: 4px 8px; border-radius: 6px; }
  #lab-formed { background: #dafbe1; border: 1px solid #4ac26b; padding: 4px 8px; border-radius: 6px; }
  #lab-sample-out { white-space: pre-wrap; max-height: 240px; overflow: auto; background: #fff; border: 1px solid #d0d7de; padding: 6px; margin: 4px 0; }
  .thumb.ablated canvas { outline: 3px solid #cf222e; opacity: 0.55; }
  .thumb.formed span::after { content: " \\2605"; color: #1a7f37; }
  #lab-effect table td.changed { background: #fff8c5; }
  #lab-effect .scroll { max-height: 180px; }
  #lab-live.on { color: #1a7f37; font-weight: 600; }
`;
document.head.appendChild(style);
document.title = "tinylm lab";
document.querySelector("h1").textContent = "tinylm lab";

$("lab-controls").innerHTML = `
  <div class="row"><label>Run <select id="lab-run"></select></label>
    <span id="lab-live" class="muted"></span>
    <label>SAE <select id="lab-sae"><option value="">none</option></select></label>
    <button id="lab-features">Features</button></div>
  <div class="row"><textarea id="lab-prompt" rows="2">First Citizen:
Before we proceed any further, hear me speak.</textarea><button id="lab-go">Inspect</button></div>
  <div id="lab-tokens" class="strip" title="Hover a token: every head's map shows where it reads"></div>
  <div class="row">Ablation <select id="lab-ablation"><option>zero</option><option>mean</option></select>
    heads <b id="lab-ablated">none</b> <button id="lab-clear">clear</button>
    <span class="muted">click a head's map to ablate it, again to restore it</span></div>
  <div id="lab-effect"></div>
  <details id="lab-patching"><summary>Patching</summary><div class="row">
    clean <input id="lab-clean" class="text" value="">
    corrupt <input id="lab-corrupt" class="text" value="">
    <button id="lab-patch">Patch</button></div></details>
  <details id="lab-sampling" open><summary>Sample</summary><div class="row">
    temperature <input id="lab-temperature" type="number" step="0.1" min="0" value="0.8">
    top-k <input id="lab-top-k" type="number" min="0" value="200">
    top-p <input id="lab-top-p" type="number" step="0.05" min="0" max="1" value="1">
    tokens <input id="lab-max-new-tokens" type="number" min="1" value="200">
    <button id="lab-sample">Sample</button> <span id="lab-sample-rate" class="muted"></span></div>
    <pre id="lab-sample-out"></pre></details>
  <div id="lab-formed"></div>
  <div id="lab-error"></div>`;

function showError(error) { $("lab-error").textContent = error ? String(error.message || error) : ""; }

// One document from every answer: the prompt's views, head scores, priors, training,
// patching. Notes are gathered from all of them.
function show() {
  const docs = ["static", "heads", "patching", "prompt", "features"].map((k) => state.views[k]).filter(Boolean);
  if (docs.length === 0) return;
  const doc = Object.assign({}, ...docs);
  doc.notes = [...new Set(docs.flatMap((d) => d.notes || []))];
  render(doc);
  decorate();
}

// What the report's drawing does not know: hover, ablation marks, formed heads.
function decorate() {
  const strip = $("lab-tokens");
  strip.textContent = "";
  const grid = $("attention-grid");
  if (data.attention && grid) {
    const maps = unpack(data.attention.patterns);
    data.attention.tokens.forEach((t, i) => {
      const tok = el("span", {class: "tok", text: visible(t), "data-index": i});
      tok.addEventListener("mouseenter", () => focusToken(maps, i));
      tok.addEventListener("mouseleave", () => focusToken(maps, -1));
      strip.appendChild(tok);
    });
    for (const canvas of grid.querySelectorAll("canvas.head-thumb")) {
      const head = canvas.dataset.layer + "." + canvas.dataset.head;
      const box = canvas.parentElement;
      box.classList.toggle("ablated", state.ablated.has(head));
      box.addEventListener("click", () => toggleHead(head));
    }
  }
  const formed = data.snapshots && data.snapshots.formed;
  if (formed && grid) {
    for (const canvas of grid.querySelectorAll("canvas.head-thumb")) {
      const l = Number(canvas.dataset.layer), h = Number(canvas.dataset.head);
      const step = formed.induction[l] && formed.induction[l][h];
      if (step !== null && step !== undefined) {
        canvas.parentElement.classList.add("formed");
        canvas.parentElement.title += " \u00b7 formed as an induction head at step " + step;
      }
    }
  }
  $("lab-ablated").textContent = state.ablated.size ? [...state.ablated].join(", ") : "none";
  showEffect();
}

// CircuitsVis's hover: every head's map keeps row i (where token i reads) and dims the rest.
function focusToken(maps, i) {
  const grid = $("attention-grid");
  grid.setAttribute("data-focus", i);
  for (const tok of $("lab-tokens").children) tok.classList.toggle("focus", Number(tok.dataset.index) === i);
  for (const canvas of grid.querySelectorAll("canvas.head-thumb")) {
    const l = Number(canvas.dataset.layer), h = Number(canvas.dataset.head);
    const bytes = maps.get(l, h);
    if (i < 0) { paint(canvas, bytes, maps.R, maps.C); continue; }
    const dimmed = new Uint8Array(bytes.length);
    for (let r = 0; r < maps.R; r++) {
      for (let c = 0; c < maps.C; c++) {
        const v = bytes[r * maps.C + c];
        dimmed[r * maps.C + c] = r === i ? Math.max(v, 24) : v >> 3;
      }
    }
    paint(canvas, dimmed, maps.R, maps.C);
  }
}

function toggleHead(head) {
  if (state.ablated.has(head)) state.ablated.delete(head); else state.ablated.add(head);
  refreshPrompt().catch(showError);
}

// The loss on the prompt and each position's top prediction, before and after the ablation.
function showEffect() {
  const box = $("lab-effect");
  box.textContent = "";
  const after = state.views.prompt && state.views.prompt.logit_lens, before = state.baseline;
  if (!state.ablated.size || !after || !before) return;
  const delta = after.mean_loss - before.mean_loss;
  box.appendChild(el("p", {id: "lab-loss-change", text: "Loss on the prompt: " + fmt(before.mean_loss) + " \u2192 " + fmt(after.mean_loss) + " nats (" + (delta >= 0 ? "+" : "") + fmt(delta) + ") with " + [...state.ablated].join(", ") + " " + $("lab-ablation").value + "-ablated."}));
  const last = (lens) => lens.stages[lens.stages.length - 1].top;
  const b = last(before), a = last(after), rows = [];
  for (let t = 0; t < a.length; t++) {
    const changed = a[t][0].token !== b[t][0].token;
    rows.push(el("tr", {}, [el("td", {text: t}), el("td", {text: visible(after.tokens[t])}),
      el("td", {text: visible(b[t][0].token) + " " + fmt(b[t][0].p, 2)}),
      el("td", {class: changed ? "changed" : "", text: visible(a[t][0].token) + " " + fmt(a[t][0].p, 2)})]));
  }
  const table = el("table", {id: "lab-predictions"}, [el("tr", {}, ["pos", "token", "top next, before", "after"].map((h) => el("th", {text: h})))].concat(rows));
  box.appendChild(el("div", {class: "scroll"}, [table]));
}

function promptParams(extra) {
  return Object.assign({run: state.run, prompt: $("lab-prompt").value, "logit-lens": "", heatmaps: "packed"}, extra || {});
}

async function refreshPrompt() {
  showError(null);
  const ablation = state.ablated.size ? {"ablate-heads": [...state.ablated].join(","), ablation: $("lab-ablation").value} : {};
  const [prompt, baseline] = await Promise.all([
    api("/api/inspect", promptParams(ablation)),
    state.ablated.size ? api("/api/inspect", promptParams()) : null]);
  state.views.prompt = prompt;
  state.baseline = (baseline || prompt).logit_lens;
  show();
}

// Views of the model alone (priors) and of its training: once per checkpoint.
async function refreshStatic() {
  state.views.static = await api("/api/inspect", {run: state.run, priors: "", training: "", heatmaps: "packed"});
  announceFormed();
  show();
}

// Head scores run on the server's heavy pool: they arrive after the rest.
async function refreshHeads() {
  state.views.heads = await api("/api/inspect", {run: state.run, heads: ""});
  show();
}

// The phase change, once training has found it (train/run/phase_change.h): from the live
// metrics as it is written, or from the training view of a run that has one.
function announcePhaseChange(pc) {
  if (!pc || (state.phaseChange && state.phaseChange.step === pc.step)) return;
  state.phaseChange = pc;
  state.announced.push("phase change at step " + pc.step + ": the repeat's loss fell " + fmt(pc.drop) + " nats in " + (pc.end - pc.start) + " steps; " + head(pc.previous_token.layer, pc.previous_token.head) + " previous-token, " + head(pc.induction.layer, pc.induction.head) + " induction formed");
  $("lab-formed").textContent = state.announced.slice(-4).join(" \u00b7 ");
}

function announceFormed() {
  const training = state.views.static.training;
  announcePhaseChange(training && training.phase_change);
  const sn = state.views.static.snapshots;
  if (!sn) return;
  const before = state.formed;
  state.formed = sn.formed;
  if (!before) return;
  for (const kind of ["induction", "previous_token"]) {
    sn.formed[kind].forEach((row, l) => row.forEach((step, h) => {
      const was = before[kind][l] && before[kind][l][h];
      if (step !== null && (was === null || was === undefined)) {
        state.announced.push("L" + l + " H" + h + " formed as " + (kind === "induction" ? "an induction" : "a previous-token") + " head at step " + step);
      }
    }));
  }
  $("lab-formed").textContent = state.announced.slice(-4).join(" \u00b7 ");
}

async function patch() {
  showError(null);
  state.views.patching = await api("/api/inspect", {run: state.run, patch: "", clean: $("lab-clean").value, corrupt: $("lab-corrupt").value});
  show();
  const section = $("patching-section");
  if (section) section.scrollIntoView();
}

// Streamed sampling: the answer is Server-Sent Events, read from the fetch's body.
async function sample() {
  showError(null);
  const out = $("lab-sample-out"), rate = $("lab-sample-rate");
  out.textContent = ""; rate.textContent = "sampling\u2026";
  out.removeAttribute("data-done");
  out.removeAttribute("data-events");
  const params = {run: state.run, prompt: $("lab-prompt").value, "num-samples": 1};
  for (const k of ["temperature", "top-k", "top-p", "max-new-tokens"]) params[k] = $("lab-" + k).value;
  if (state.ablated.size) params.ablate = [...state.ablated].join(",");
  const response = await fetch("/api/sample?" + new URLSearchParams(params));
  if (!response.ok) { const body = await response.json(); rate.textContent = ""; throw new Error(body.error + " (" + body.where + ")"); }
  const reader = response.body.getReader(), decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, {stream: true});
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end); buffer = buffer.slice(end + 2);
      const name = (block.match(/^event: (.*)$/m) || [])[1], line = (block.match(/^data: (.*)$/m) || [])[1];
      if (!name || line === undefined) continue;
      const d = JSON.parse(line);
      if ((name === "prompt" || name === "token") && d.sample === 0) out.textContent += d.text;
      if (name === "token" && d.id !== undefined) out.dataset.events = Number(out.dataset.events || 0) + 1;
      if (name === "done") { out.dataset.tokens = d.tokens; rate.textContent = d.tokens + " tokens, " + fmt(d.tokens_per_second, 0) + " tokens/s"; out.setAttribute("data-done", "1"); }
      if (name === "error") throw new Error(d.error);
    }
  }
}

// While `tinylm train` writes the run: its metrics and snapshots as they come.
let live = null, pending = null;
function follow() {
  if (live) live.close();
  live = new EventSource("/api/live?" + new URLSearchParams({run: state.run}));
  const later = (what) => {
    if (pending) clearTimeout(pending);
    pending = setTimeout(() => { pending = null; what().catch(showError); }, 1000);
  };
  live.addEventListener("metrics", (e) => {
    const m = JSON.parse(e.data);
    if (m.kind === "phase_change") { announcePhaseChange(m); return; }
    const badge = $("lab-live");
    badge.classList.add("on");
    badge.textContent = "training: step " + m.step + (m.loss !== undefined ? ", loss " + fmt(m.loss) : m.val_loss !== undefined ? ", val loss " + fmt(m.val_loss) : "");
    later(refreshStatic);
  });
  live.addEventListener("snapshot", () => later(refreshStatic));
  live.addEventListener("checkpoint", () => later(() => Promise.all([refreshStatic(), refreshPrompt(), refreshHeads()])));
}

// An SAE's features (inspect's features=NAME), from the run's saes/.
async function refreshFeatures() {
  const name = $("lab-sae").value;
  if (!name) { delete state.views.features; show(); return; }
  state.views.features = await api("/api/inspect", {run: state.run, features: name});
  show();
}

async function openRun(id) {
  state.run = id;
  const sae = $("lab-sae");
  sae.textContent = "";
  sae.appendChild(el("option", {value: "", text: "none"}));
  for (const name of (state.runs.find((r) => r.id === id) || {saes: []}).saes || []) sae.appendChild(el("option", {value: name, text: name}));
  state.views = {};
  state.formed = null;
  state.phaseChange = null;
  state.announced = [];
  state.ablated.clear();
  follow();
  await Promise.all([refreshPrompt(), refreshStatic()]);
  document.body.setAttribute("data-lab-ready", "1");  // the prompt's views and the run's
  refreshHeads().catch(showError);
}

async function start() {
  const runs = (await api("/api/runs", {})).runs;
  state.runs = runs;
  const select = $("lab-run");
  for (const r of runs) select.appendChild(el("option", {value: r.id, text: r.id + (r.step === null ? "" : " (step " + r.step + ")")}));
  select.addEventListener("change", () => openRun(select.value).catch(showError));
  $("lab-go").addEventListener("click", () => refreshPrompt().catch(showError));
  $("lab-prompt").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) refreshPrompt().catch(showError); });
  $("lab-ablation").addEventListener("change", () => { if (state.ablated.size) refreshPrompt().catch(showError); });
  $("lab-clear").addEventListener("click", () => { state.ablated.clear(); refreshPrompt().catch(showError); });
  $("lab-patch").addEventListener("click", () => patch().catch(showError));
  $("lab-sample").addEventListener("click", () => sample().catch(showError));
  $("lab-features").addEventListener("click", () => refreshFeatures().catch(showError));
  if (runs.length) await openRun(runs[0].id);
}

start().catch(showError);

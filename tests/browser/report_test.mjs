// Opens a tinylm inspect report in headless Chromium (Debian's, driven by playwright-core)
// and checks it against the JSON written beside it:
//   node report_test.mjs REPORT.html REPORT.json [SCREENSHOT.png]
// Fails on any console error, page error or network request; checks that there are
// L x nh attention heatmaps, that clicking one shows that head with the prompt's tokens,
// that hovering a token colours what it reads from, that the head-score table sorts, and
// that the numbers on the page are the JSON's; that the composition view lists every head,
// draws its graph and switches mode; that attribution's parts add up to its logit row; and
// that the patching heatmaps hold the JSON's fractions.
import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [htmlPath, jsonPath, screenshot] = process.argv.slice(2);
if (!htmlPath || !jsonPath) {
  console.error("usage: node report_test.mjs REPORT.html REPORT.json [SCREENSHOT.png]");
  process.exit(2);
}
const doc = JSON.parse(readFileSync(jsonPath, "utf8"));
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); };
// What the run behind the report has, said by the caller (tests/report_in_browser.sh), so
// that a view missing from the JSON is a failure, never a check skipped.
const expected = (name) => {
  const v = process.env[name];
  if (v !== "0" && v !== "1") {
    console.error(`set ${name}=0 or 1: whether the run has that data`);
    process.exit(2);
  }
  return v === "1";
};
const expectTraining = expected("EXPECT_TRAINING"), expectSnapshots = expected("EXPECT_SNAPSHOTS");
check(Boolean(doc.training) === expectTraining, `training data: ${Boolean(doc.training)}, expected ${expectTraining}`);
check(Boolean(doc.snapshots) === expectSnapshots, `snapshots: ${Boolean(doc.snapshots)}, expected ${expectSnapshots}`);
const visible = (t) => ({" ": "\u2423", "\n": "\u21b5", "\t": "\u2192", "\r": "\u240d"})[t] ?? t;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push("console: " + m.text()); });
  page.on("pageerror", (e) => errors.push("page error: " + e.message));
  page.on("request", (r) => { if (!r.url().startsWith("file:") && !r.url().startsWith("data:")) errors.push("network request: " + r.url()); });
  await page.goto(pathToFileURL(htmlPath).href);
  await page.waitForSelector("body[data-ready='1']", { timeout: 60000 });
  const renderMs = await page.getAttribute("body", "data-render-ms");
  const readyMs = await page.getAttribute("body", "data-ready-ms");

  // L x nh heatmaps of the prompt.
  const { n_layer: L, n_head: H } = doc.model;
  check(await page.locator("canvas.head-thumb").count() === L * H, `expected ${L * H} attention heatmaps`);

  // Clicking the last head shows it, titled, with the prompt's tokens.
  const tokens = doc.attention.tokens;
  await page.locator(`canvas.head-thumb[data-layer='${L - 1}'][data-head='${H - 1}']`).click();
  check(await page.locator("#head-detail").isVisible(), "the clicked head's detail is not shown");
  const title = await page.textContent("#detail-title");
  check(title.startsWith(`L${L - 1} H${H - 1}`), `detail title is "${title}"`);
  const stripTokens = await page.locator("#detail-strip .tok").allTextContents();
  check(JSON.stringify(stripTokens) === JSON.stringify(tokens.map(visible)), "the detail's tokens are not the prompt's");
  const canvasSize = await page.locator("#detail-canvas").boundingBox();
  check(canvasSize && canvasSize.width > 100, "the enlarged heatmap is not drawn");

  // Hovering the last token colours the tokens it reads from, with the pattern's row as weights.
  const last = tokens.length - 1;
  await page.locator("#detail-strip .tok").nth(last).hover();
  const coloured = await page.locator("#detail-strip .tok").evaluateAll((spans) => spans.filter((s) => s.style.background !== "").length);
  check(coloured === tokens.length, `hovering coloured ${coloured} of ${tokens.length} tokens`);
  const row = doc.attention.patterns[L - 1][H - 1][last];
  const strongest = row.indexOf(Math.max(...row));
  const alpha = await page.locator("#detail-strip .tok").nth(strongest).evaluate((s) => s.style.background);
  const shown = Number(/rgba\(\s*9,\s*105,\s*218,\s*([0-9.]+)\)/.exec(alpha)?.[1]);
  check(Math.abs(shown - row[strongest]) <= 1 / 255 + 1e-4, `hover weight ${shown} != pattern ${row[strongest]}`);

  // The head-score table: numbers equal the JSON's, and sorting by a column works.
  const best = doc.heads.strongest.previous_token;
  check(await page.textContent("#strongest-prev-head") === `${best.layer}.${best.head}`, "strongest previous-token head differs from the JSON's");
  check(await page.textContent("#strongest-prev-score") === best.score.toFixed(3), "strongest previous-token score differs from the JSON's");
  check(await page.locator("#head-scores tbody tr").count() === L * H, "head-score table does not list every head");
  await page.locator("#head-scores th", { hasText: /^previous token$/ }).click();
  const firstRow = await page.locator("#head-scores tbody tr").first().locator("td").allTextContents();
  check(firstRow[0] === `${best.layer}.${best.head}` && firstRow[1] === best.score.toFixed(3),
        `after sorting by previous token the first row is ${firstRow.slice(0, 2)}`);
  const cell = doc.heads.scores.induction[0][0];
  const cellOnPage = await page.locator("#head-scores tbody tr", { has: page.locator("td:first-child", { hasText: /^0\.0$/ }) })
    .locator("td").nth(5).textContent();
  check(cellOnPage === (cell === null ? "\u2013" : cell.toFixed(3)), `induction score of head 0.0: page ${cellOnPage}, JSON ${cell}`);

  // Ablation, priors and training views are there.
  check(await page.locator("#ablation tbody tr").count() === L * H, "ablation table does not list every head");
  if (doc.priors.positions) check(await page.locator("canvas.prior-thumb").count() >= L * H, "position priors missing");
  const trainingCharts = await page.locator("#training-charts svg").count();
  check(expectTraining ? trainingCharts >= 1 : trainingCharts === 0, `training charts: ${trainingCharts}`);
  // The phase change the training found, or that it found none.
  if (expectTraining && doc.training.probe.length > 0) {
    const said = await page.locator("#phase-change").textContent();
    const pc = doc.training.phase_change;
    check(said.startsWith(pc ? `Phase change at step ${pc.step}:` : "No phase change:"), `phase change line: "${said}"`);
  }
  // Composition: an n x n table, the strongest pair (K first, then Q on a click), the graph.
  const c = doc.composition;
  check(await page.locator("#composition-table tbody tr").count() === L * H, "composition table does not list every head");
  const pair = (p) => `${p.from.layer}.${p.from.head} \u2192 ${p.to.layer}.${p.to.head}`;
  check(await page.textContent("#composition-strongest") === pair(c.strongest.k), "strongest K pair differs from the JSON's");
  if (L > 1) check(await page.locator("#composition-graph line.edge").count() > 0, "the composition graph has no edges");
  await page.locator("#composition-modes button[data-mode='q']").click();
  check(await page.textContent("#composition-strongest") === pair(c.strongest.q), "the Q button does not show the strongest Q pair");

  // Geometry: a label per token on the PCA map, a row per token of neighbours.
  const V = doc.vocab.length;
  check(await page.locator("#embedding-svg text.embedding-label").count() === V, "the embedding map does not label every token");
  check(await page.locator("#neighbours tbody tr").count() === V, "the neighbours table does not list every token");

  // Relative and alibi positions: a chart of each layer's bias per distance.
  const bias = doc.geometry.positions.distance_bias;
  check(await page.locator("svg.distance-bias-chart").count() === (bias ? L : 0), "the distance-bias charts are not one per layer");
  if (doc.analogy) {
    check((await page.textContent("#analogy")).includes(visible(doc.analogy.nearest[0])), "the analogy's nearest token is not shown");
  }
  // Loss by position: one point per position, and the block_size line.
  const pl = doc.position_loss;
  const perPosition = await page.locator("#position-loss-svg path").first().getAttribute("d");
  check(perPosition.split("L").length === pl.per_position.length, `the position-loss curve has ${perPosition.split("L").length} points, the JSON ${pl.per_position.length}`);
  check(await page.locator("#position-loss-svg path").count() === 3, "the position-loss chart misses a series");
  // Context drift: a point per stage, for the token the JSON names.
  const d = doc.context_drift;
  check((await page.locator("#drift-svg path").first().getAttribute("d")).split("L").length === d.stages.length, "the drift curve does not have a point per stage");
  check((await page.textContent("#drift-lead")).includes(String(d.occurrences)), "the drift lead does not give the occurrences");

  // Circuits: a row per head, its OV reads as the JSON's.
  check(await page.locator("#circuits-table tbody tr").count() === L * H, "circuits table does not list every head");
  const reads = await page.locator("#circuits-table tbody tr").first().locator("td").nth(2).textContent();
  check(reads === doc.circuits.ov[0][0][0].reads.map((t) => visible(t.token)).join(" "), `circuits: head 0.0 reads ${reads}`);

  // Attribution: the logit row's total is the JSON's logits summed; every part is a row.
  const a = doc.attribution;
  const partRows = 1 + L * H + a.mlps_total.filter((v) => v !== null).length + 2;
  check(await page.locator("#attribution-table tbody tr").count() === partRows, "attribution table misses parts");
  const logitTotal = await page.locator("#attribution-table tbody tr").last().locator("td").last().getAttribute("data-value");
  const jsonTotal = a.logits.reduce((x, y) => x + y, 0);
  check(Math.abs(Number(logitTotal) - jsonTotal) < 1e-6 * Math.max(1, Math.abs(jsonTotal)), `attribution total ${logitTotal} != ${jsonTotal}`);

  // Patching, when the JSON has it: the heads' heatmap holds its fractions.
  if (doc.patching) {
    check(await page.locator("#patching-heads tbody tr").count() === L, "patching heatmap does not have a row per layer");
    const shownFraction = await page.locator("#patching-heads tbody tr").nth(L - 1).locator("td").nth(H).textContent();
    check(shownFraction === doc.patching.heads[L - 1][H - 1].toFixed(3), `patching fraction ${shownFraction} != ${doc.patching.heads[L - 1][H - 1]}`);
    check(await page.locator("#patching-resid tbody tr").count() === L, "resid_pre heatmap does not have a row per layer");
  } else {
    check(!(await page.locator("#patching-section").isVisible()), "a patching section without patching data");
  }
  // Snapshots: the slider replays each step's patterns; the formation table lists every head.
  if (doc.snapshots) {
    const sn = doc.snapshots, S = sn.steps.length;
    check(await page.getAttribute("#snapshot-step", "data-step") === String(sn.steps[S - 1]), "the slider does not start at the last snapshot");
    check(await page.locator("#snapshot-text-grid canvas.snapshot-thumb").count() === L * H, "the snapshot grid does not show every head");
    await page.locator("#snapshot-slider").fill("0");
    check(await page.getAttribute("#snapshot-step", "data-step") === String(sn.steps[0]), "moving the slider does not change the step");
    const pixel = await page.locator("#snapshot-text-grid canvas.snapshot-thumb").first().evaluate((c) => Array.from(c.getContext("2d").getImageData(0, c.height - 1, 1, 1).data));
    // The bottom-left cell of head 0.0 at step 0 (the JSON's value there, as the page's palette
    // draws it: byte = round(255 v), red = 255 - 247 (byte / 255)^0.6).
    const T = sn.text_patterns[0][0][0].length, v = sn.text_patterns[0][0][0][T - 1][0];
    const red = Math.round(255 - 247 * Math.pow(Math.round(255 * v) / 255, 0.6));
    check(Math.abs(pixel[0] - red) <= 2, `head 0.0 at step 0: pixel red ${pixel[0]}, the JSON's ${v} draws ${red}`);
    check(await page.locator("#formation tbody tr").count() === L * H, "the formation table does not list every head");
    check(await page.locator("#snapshot-charts svg").count() === 5, "the score-against-step charts are missing");
  }
  // Features of an SAE: the table most frequent first, a row's detail, the token search, sorting.
  if (doc.features) {
    const F = doc.features, first = F.features[0];
    check(await page.locator("#features-table tr[data-feature]").count() === Math.min(400, F.features.length), "the features table does not list every feature that fired");
    check(await page.getAttribute("#features-table tr[data-feature] >> nth=0", "data-feature") === String(first.index), "the features table does not start with the most frequent");
    await page.locator("#features-table tr[data-feature]").first().click();
    check(await page.locator("#feature-detail").isVisible(), "a clicked feature's detail is not shown");
    check(await page.locator("#feature-detail .context").count() === first.top.length, "the detail does not show every top context");
    const hot = await page.locator("#feature-detail .context .hot").first().textContent();
    const [w, t] = first.top[0];
    check(hot === visible(F.windows[w][t]), `the top context outlines "${hot}", not "${visible(F.windows[w][t])}"`);
    check(await page.locator("#feature-detail .feature-heads tr").count() === first.head_shares.length + 1, "the detail does not list every head's share");
    check(await page.locator("#feature-detail .feature-tokens tr").count() === first.promoted.length + 1, "the detail does not list the promoted tokens");
    check(await page.locator("#feature-detail svg.feature-histogram rect").count() === F.histogram_bins, "the histogram does not have every bin");
    const token = first.fires_on[0][0], firing = F.features.filter((f) => f.fires_on.some(([x]) => x === token)).length;
    await page.locator("#features-search").fill(token);
    check(await page.locator("#features-table tr[data-feature]").count() === Math.min(400, firing), `searching "${token}" lists ${await page.locator("#features-table tr[data-feature]").count()}, the JSON has ${firing}`);
    await page.locator("#features-search").fill("");
    await page.locator("#features-sort").selectOption("index");
    const least = Math.min(...F.features.map((f) => f.index));
    check(await page.getAttribute("#features-table tr[data-feature] >> nth=0", "data-feature") === String(least), "sorting by index does not put the lowest first");
  } else {
    check(!(await page.locator("#features-section").isVisible()), "a features section without an SAE");
  }
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
  failures.push(...errors);
  console.log(`report drawn in ${renderMs} ms, ready ${readyMs} ms after navigation (${L} layers x ${H} heads, ${tokens.length} tokens)`);
} finally {
  await browser.close();
}
if (failures.length) {
  console.error("FAILED:\n  " + failures.join("\n  "));
  process.exit(1);
}
console.log("report OK");

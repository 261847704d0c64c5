// The console's start: sign in with a token, then the analyst's or the curator's view.
import { ApiError, call, datasetPath, token } from "./api.js";
import { errorBars } from "./chart.js";
import { loadLedger, runVerify } from "./curator.js";
import { el, loss, num, show, table, when } from "./dom.js";

const $ = (id) => document.getElementById(id);
const BUDGET = { PureDP: ["epsilon", "ε"], ApproxDP: ["epsilon", "ε"], ZCDP: ["rho", "ρ"] };
let datasets = [];
let tab = "sql";

function say(text, kind) {
  const box = $("message");
  box.textContent = text || "";
  box.className = kind || "";
  box.hidden = !text;
}

function failed(err) {
  say(err instanceof ApiError ? err.message : `error: ${err.message || err}`, "error");
}

// -- signing in ---------------------------------------------------------------------------
async function start() {
  say("");
  try {
    datasets = await call("GET", "/v1/datasets");
    await analystView();
    return;
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 401) { failed(err); return; }
  }
  try {
    await loadLedger();
    signedIn("curator");
    $("curator").hidden = false;
  } catch (err) {
    if (err instanceof ApiError && [401, 501].includes(err.status)) {  // 501: no curator
      token.clear();
      say("this token is neither an analyst's nor the curator's", "error");
    } else failed(err);
  }
}

function signedIn(role) {
  $("login").hidden = true;
  $("session").hidden = false;
  $("who").textContent = `signed in (${role})`;
}

function signOut() {
  token.clear();
  datasets = [];
  for (const id of ["analyst", "curator", "session"]) $(id).hidden = true;
  $("login").hidden = false;
  for (const id of ["datasets", "explained", "result", "history", "ledger-datasets", "burn",
    "ledger-releases", "ledger-streams", "ledger-analysts", "ledger-grants"]) show(id);
  say("");
}

// -- the analyst's view -------------------------------------------------------------------
async function analystView() {
  signedIn("analyst");
  $("analyst").hidden = false;
  renderDatasets();
  const select = $("dataset");
  const chosen = select.value;
  select.replaceChildren(...datasets.map((d) => el("option", { value: d.name, text: d.name })));
  if (datasets.some((d) => d.name === chosen)) select.value = chosen;
  onDataset();
  await loadHistory();
}

function declaredRows(d) {
  const declared = (d.declared && d.declared.columns) || {};
  return d.columns.map((c) => {
    const spec = declared[c.name];
    let domain = "";
    if (spec && spec.type === "numeric") domain = `[${spec.lower}, ${spec.upper}]`;
    if (spec && spec.type === "categorical") domain = (spec.categories || []).join(", ");
    return { name: c.name, dtype: c.dtype, declared: spec ? spec.type : "—", domain };
  });
}

function renderDatasets() {
  show("datasets", datasets.map((d) => el("article", { class: "dataset", "data-name": d.name },
    el("h3", { text: d.name }),
    el("dl", {},
      el("dt", { text: "privacy unit" }), el("dd", { text: d.privacy_unit }),
      el("dt", { text: "measure" }), el("dd", { text: d.measure }),
      el("dt", { text: "remaining" }), el("dd", { class: "remaining" }, loss(d.remaining)),
      el("dt", { text: "my spend" }), el("dd", {}, loss(d.analyst_spent)),
      el("dt", { text: "dataset cap" }), el("dd", {}, loss(d.cap))),
    el("details", {}, el("summary", { text: "schema" }),
      table([["name", "column"], ["dtype", "type"], ["declared", "declared"],
        ["domain", "domain"]], declaredRows(d))))));
}

function current() {
  return datasets.find((d) => d.name === $("dataset").value);
}

function onDataset() {
  const d = current();
  if (!d) return;
  const [, symbol] = BUDGET[d.measure] || ["epsilon", "ε"];
  $("budget-label").textContent = symbol;
  $("delta-label").hidden = $("delta-value").hidden = d.measure !== "ApproxDP";
  if (!$("sql").value) $("sql").value = `SELECT COUNT(*) AS n FROM ${d.name}`;
  if (!$("json").value) {
    $("json").value = JSON.stringify({ aggs: [{ agg: "count" }] }, null, 2);
  }
}

function setTab(name) {
  tab = name;
  $("tab-sql").setAttribute("aria-selected", String(name === "sql"));
  $("tab-json").setAttribute("aria-selected", String(name === "json"));
  $("sql").hidden = name !== "sql";
  $("json").hidden = name !== "json";
}

function budget(d) {
  const [field] = BUDGET[d.measure] || ["epsilon"];
  const out = { [field]: $("budget-value").value.trim() };
  if (d.measure === "ApproxDP") out.delta = $("delta-value").value.trim();
  return out;
}

function request(explain) {
  const d = current();
  if (tab === "sql") {
    return [datasetPath(d.name, explain ? "sql/explain" : "sql"),
      { sql: $("sql").value, budget: budget(d) }];
  }
  let body;
  try { body = JSON.parse($("json").value); } catch (err) {
    throw new Error(`the JSON query does not parse: ${err.message}`);
  }
  if (!body || typeof body !== "object" || Array.isArray(body)) {
    throw new Error("the JSON query must be an object");
  }
  if (!("budget" in body)) body.budget = budget(d);
  return [datasetPath(d.name, explain ? "explain" : "release"), body];
}

async function explain() {
  say("");
  try {
    const [path, body] = request(true);
    const out = await call("POST", path, body);
    show("explained", el("h3", { text: "Explain (nothing spent)" }),
      table([["aggregation", "output"], ["mechanism", "mechanism"],
        ["sensitivity", "sensitivity", num], ["scale", "scale", num],
        ["expected_error", "expected error", (v, r) => `± ${num(v)} (${r.error_kind})`],
        ["loss", "loss", loss]], out.statistics, { id: "explain-table" }),
      el("p", {}, "total ", loss(out.total), ", remaining ", loss(out.remaining),
        out.affordable ? "" : " — not affordable"));
  } catch (err) { failed(err); }
}

function chartPoints(out) {
  const names = out.columns.map((c) => c.name);
  const value = names.find((n) => names.includes(`${n}_ci_low`) && names.includes(`${n}_ci_high`));
  if (!value) return null;
  const key = out.columns.find((c) => !c.name.startsWith(value) && c.dtype === "String");
  return [value, out.records.map((r, i) => ({ label: key ? r[key.name] : String(i + 1),
    value: r[value], low: r[`${value}_ci_low`], high: r[`${value}_ci_high`] }))];
}

async function release() {
  say("");
  try {
    const [path, body] = request(false);
    const out = await call("POST", path, body);
    const chart = chartPoints(out);
    show("result", el("h3", { text: `Release ${out.release_id}` }),
      el("p", { id: "release-loss" }, "loss ", loss(out.loss),
        out.replayed ? " (a replay: nothing spent)" : ""),
      table(out.columns.map((c) => [c.name, c.name, num]), out.records,
        { id: "result-table" }),
      chart ? errorBars(chart[1], `${chart[0]} with its interval`) : null);
    datasets = await call("GET", "/v1/datasets");
    renderDatasets();
    await loadHistory();
  } catch (err) { failed(err); }
}

async function loadHistory() {
  const rows = await call("GET", "/v1/releases");
  show("history", rows.length
    ? table([["id", "id"], ["dataset", "dataset"], ["time", "time", when], ["loss", "loss", loss],
      ["status", "status"], ["query", "query", (q) => String(q).slice(0, 200)]],
    rows.slice().reverse(), { id: "history-table" })
    : el("p", { text: "no releases yet" }));
}

// -- wiring -------------------------------------------------------------------------------
$("login").addEventListener("submit", (event) => {
  event.preventDefault();
  token.set($("token").value.trim());
  $("token").value = "";
  start();
});
$("signout").addEventListener("click", signOut);
$("dataset").addEventListener("change", onDataset);
$("tab-sql").addEventListener("click", () => setTab("sql"));
$("tab-json").addEventListener("click", () => setTab("json"));
$("explain").addEventListener("click", explain);
$("release").addEventListener("click", release);
$("verify").addEventListener("click", () => runVerify().catch(failed));
if (token.get()) start();

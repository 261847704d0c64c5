// The curator's view: the ledger from /v1/curator/ledger, and verify on demand.
import { call } from "./api.js";
import { burnDown } from "./chart.js";
import { el, loss, show, table, when } from "./dom.js";

const lossCell = (value) => (value ? loss(value) : "—");

export async function loadLedger() {
  const ledger = await call("GET", "/v1/curator/ledger");
  show("ledger-datasets", el("p", { class: "head", text: `chain head ${ledger.head}` }),
    table([["name", "dataset"], ["measure", "measure"], ["privacy_unit", "privacy unit"],
      ["cap", "cap", lossCell], ["spent", "spent", lossCell],
      ["per_day", "per day", lossCell], ["retired", "retired", (r) => (r ? "yes" : "no")]],
    ledger.datasets, { id: "ledger-datasets-table" }));
  show("burn", ledger.datasets.map((d) => el("figure", {},
    burnDown(d.burn, d.cap_value, `burn-down of ${d.name}`),
    el("figcaption", { text: `${d.name}: ${d.spent.text} of ${d.cap.text}` }))));
  show("ledger-releases", el("p", { text: `releases: ${ledger.release_count} (the newest ${ledger.releases.length} shown, newest first)` }),
    table([["id", "id"], ["dataset", "dataset"], ["analyst", "analyst"], ["time", "time", when],
      ["loss", "loss", lossCell], ["status", "status"], ["query", "query"]],
    ledger.releases, { id: "ledger-releases-table" }));
  show("ledger-streams", ledger.streams.length
    ? table([["release_id", "release"], ["dataset", "dataset"], ["analyst", "analyst"],
      ["step", "last step"]], ledger.streams)
    : el("p", { text: "no hosted streams" }));
  show("ledger-analysts", table([["name", "analyst"], ["created", "created", when]],
    ledger.analysts));
  show("ledger-grants", table([["analyst", "analyst"], ["dataset", "dataset"],
    ["cap", "cap", (v) => (v ? loss(v) : "the dataset's")], ["spent", "spent", lossCell]],
  ledger.grants));
  return ledger;
}

export async function runVerify() {
  const status = show("verify-status", "verifying…");
  status.className = "";
  const out = await call("POST", "/v1/curator/verify");
  status.textContent = out.ok
    ? `intact: ${out.releases} releases, head ${out.head.slice(0, 16)}…`
    : `${out.problems.length} problem(s) found`;
  status.className = out.ok ? "ok" : "bad";
  show("verify-problems", out.problems.map((p) => el("li", { text: p })));
  return out;
}

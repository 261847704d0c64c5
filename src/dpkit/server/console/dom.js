// Building the page from values: every value becomes a text node or an attribute value,
// never parsed as markup (the console has no HTML-parsing sink).
const SVG_NS = "http://www.w3.org/2000/svg";

function append(node, child) {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) { child.forEach((c) => append(node, c)); return; }
  node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
}

function build(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "text") node.textContent = String(value);
    else if (typeof value === "function") node.addEventListener(key, value);
    else node.setAttribute(key, String(value));
  }
  append(node, children);
  return node;
}

/** An HTML element: attributes (names are the code's own), then children as text or nodes. */
export function el(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element, the same way. */
export function svg(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** Replace a container's content. */
export function show(id, ...children) {
  const node = document.getElementById(id);
  node.replaceChildren();
  append(node, children);
  return node;
}

/** A table of rows (objects) under the given columns: [key, heading, format?]. */
export function table(columns, rows, attrs) {
  const head = el("tr", {}, columns.map(([, heading]) => el("th", { text: heading })));
  const body = rows.map((row) => el("tr", {}, columns.map(([key, , format]) => {
    const value = format ? format(row[key], row) : row[key];
    return value instanceof Node ? el("td", {}, value) : el("td", { text: value ?? "" });
  })));
  return el("table", attrs, el("thead", {}, head), el("tbody", {}, body));
}

/** A loss as people read it, with the exact value in a tooltip and a data attribute: the
 * response's `exact` map (an older server sent the exact strings as the fields). */
export function loss(value) {
  if (!value) return "";
  const fields = value.exact ?? Object.fromEntries(Object.entries(value)
    .filter(([k]) => !["measure", "text", "exact"].includes(k)));
  const pairs = Object.entries(fields);
  return el("span", { class: "loss", title: `exact: ${pairs.map(([k, v]) => `${k} = ${v}`)
    .join(", ")}`, "data-exact": pairs.length ? String(pairs[0][1]) : "" }, value.text);
}

/** A number for a table cell: integers as they are, others to 4 significant digits. */
export function num(value) {
  if (typeof value !== "number") return value === null || value === undefined ? "" : value;
  return Number.isInteger(value) ? String(value) : value.toPrecision(4);
}

/** A ledger time stamp to the second, in UTC. */
export function when(stamp) {
  return stamp ? `${String(stamp).replace("T", " ").slice(0, 19)} UTC` : "";
}

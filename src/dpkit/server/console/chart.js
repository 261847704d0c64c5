// Charts drawn as SVG with DOM calls (labels are text nodes): a point estimate per group
// with its interval as an error bar, and a ledger's burn-down.
import { svg } from "./dom.js";

const W = 640, H = 280, LEFT = 64, RIGHT = 16, TOP = 16, BOTTOM = 56;

function short(label) {
  return label.length > 32 ? `${label.slice(0, 31)}…` : label;
}

function scale(lo, hi, from, to) {
  const span = hi - lo || 1;
  return (v) => from + ((v - lo) / span) * (to - from);
}

function axis(lo, hi, y) {
  const ticks = [lo, (lo + hi) / 2, hi];
  return ticks.map((t) => svg("g", { class: "tick" },
    svg("line", { x1: LEFT - 4, x2: W - RIGHT, y1: y(t), y2: y(t) }),
    svg("text", { x: LEFT - 6, y: y(t) + 4, "text-anchor": "end",
      text: Number.isInteger(t) ? String(t) : t.toPrecision(3) })));
}

/**
 * Bars with error bars: points [{label, value, low, high}] (low/high may be null).
 * Returns an <svg> whose error bars have the class "errorbar".
 */
export function errorBars(points, title) {
  const values = points.flatMap((p) => [p.value, p.low, p.high]).filter(Number.isFinite);
  const lo = Math.min(0, ...values), hi = Math.max(0, ...values);
  const y = scale(lo, hi, H - BOTTOM, TOP);
  const step = (W - LEFT - RIGHT) / Math.max(points.length, 1);
  const chart = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, width: W, height: H,
    role: "img", "aria-label": title }, svg("title", { text: title }), axis(lo, hi, y));
  points.forEach((p, i) => {
    const x = LEFT + step * (i + 0.5), half = Math.min(step * 0.3, 40);
    if (Number.isFinite(p.value)) {
      const top = Math.min(y(p.value), y(0)), height = Math.abs(y(p.value) - y(0));
      chart.appendChild(svg("rect", { class: "bar", x: x - half, y: top, width: 2 * half,
        height: Math.max(height, 1) }, svg("title", { text: `${p.label}: ${p.value}` })));
    }
    if (Number.isFinite(p.low) && Number.isFinite(p.high)) {
      chart.appendChild(svg("g", { class: "errorbar" },
        svg("line", { x1: x, x2: x, y1: y(p.low), y2: y(p.high) }),
        svg("line", { x1: x - half / 2, x2: x + half / 2, y1: y(p.low), y2: y(p.low) }),
        svg("line", { x1: x - half / 2, x2: x + half / 2, y1: y(p.high), y2: y(p.high) })));
    }
    chart.appendChild(svg("text", { class: "label", x, y: H - BOTTOM + 18,
      "text-anchor": "middle", text: short(String(p.label)) }));
  });
  return chart;
}

/** A burn-down: the running spend after each release [{spent}] against the cap. */
export function burnDown(points, cap, title) {
  const hi = Math.max(cap, ...points.map((p) => p.spent), 1e-12);
  const y = scale(0, hi, H - BOTTOM, TOP);
  const x = scale(0, Math.max(points.length, 1), LEFT, W - RIGHT);
  const path = [[0, 0], ...points.map((p, i) => [i + 1, p.spent])]
    .map(([i, v]) => `${x(i)},${y(v)}`).join(" ");
  return svg("svg", { class: "chart burn", viewBox: `0 0 ${W} ${H}`, width: W, height: H,
    role: "img", "aria-label": title }, svg("title", { text: title }), axis(0, hi, y),
  svg("line", { class: "cap", x1: LEFT, x2: W - RIGHT, y1: y(cap), y2: y(cap) }),
  svg("polyline", { class: "spend", points: path }),
  svg("text", { class: "label", x: W - RIGHT, y: y(cap) - 6, "text-anchor": "end",
    text: `cap ${cap}` }),
  svg("text", { class: "label", x: (LEFT + W - RIGHT) / 2, y: H - 12, "text-anchor": "middle",
    text: `releases (${points.length})` }));
}

// Hand-drawn SVG charts (no library): a time-series line chart and a node-link graph.
// Each chart is an <svg role="img"> whose aria-label says what it shows in words.

import { h } from "./dom.js";

export const PALETTE = ["#2457c5", "#d1495b", "#2a9d8f", "#e9a23b", "#7b5ea7", "#4d908e", "#c05780", "#577590"];

const W = 640;
const H = 240;
const PAD = { left: 56, right: 16, top: 14, bottom: 34 };

function niceMax(value) {
  if (!(value > 0)) return 1;
  const exp = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * exp >= value) return step * exp;
  return 10 * exp;
}

function short(n) {
  if (Math.abs(n) >= 1e6) return `${+(n / 1e6).toFixed(1)}M`;
  if (Math.abs(n) >= 1e3) return `${+(n / 1e3).toFixed(1)}k`;
  return `${+n.toFixed(2)}`;
}

/**
 * lineChart({title, unit, series: [{name, points: [[Date, number]]}], from, to})
 * `from`/`to` (Dates) fix the time axis to the selected range.
 */
export function lineChart({ title, unit = "", series, from, to }) {
  const all = series.flatMap((s) => s.points);
  const t0 = (from || new Date(Math.min(...all.map((p) => +p[0])))).getTime();
  const t1 = (to || new Date(Math.max(...all.map((p) => +p[0])))).getTime();
  const span = Math.max(1, t1 - t0);
  const ymax = niceMax(Math.max(0, ...all.map((p) => p[1])));
  const x = (t) => PAD.left + ((t - t0) / span) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - (v / ymax) * (H - PAD.top - PAD.bottom);

  const grid = [];
  for (let i = 0; i <= 4; i += 1) {
    const v = (ymax / 4) * i;
    grid.push(
      h("svg:line", { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v), stroke: "#e3e6ea" }),
      h("svg:text", { x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 13, fill: "#5a6270" }, short(v)),
    );
  }
  const longRange = span > 2 * 86400e3;
  for (let i = 0; i <= 4; i += 1) {
    const t = t0 + (span / 4) * i;
    const d = new Date(t);
    const label = longRange
      ? d.toLocaleDateString(undefined, { month: "short", day: "numeric" })
      : d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
    grid.push(h("svg:text", { x: x(t), y: H - 12, "text-anchor": "middle", "font-size": 13, fill: "#5a6270" }, label));
  }

  const lines = series.map((s, i) => {
    const color = PALETTE[i % PALETTE.length];
    const pts = [...s.points].sort((a, b) => a[0] - b[0]);
    const d = pts.map((p, j) => `${j ? "L" : "M"}${x(+p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join("");
    return h(
      "svg:g",
      {},
      pts.length > 1 ? h("svg:path", { d, fill: "none", stroke: color, "stroke-width": 2 }) : null,
      pts.map((p) => h("svg:circle", { cx: x(+p[0]), cy: y(p[1]), r: 3, fill: color }, h("svg:title", {}, `${s.name}: ${short(p[1])}${unit} at ${new Date(p[0]).toLocaleString()}`))),
    );
  });

  const summary = series.length
    ? series
        .map((s) => {
          const total = s.points.reduce((a, p) => a + p[1], 0);
          const peak = Math.max(0, ...s.points.map((p) => p[1]));
          return `${s.name}: ${s.points.length} points, peak ${short(peak)}${unit}, sum ${short(total)}${unit}`;
        })
        .join("; ")
    : "no data in this range";
  const svg = h(
    "svg:svg",
    { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": `${title}: ${summary}` },
    h("svg:line", { x1: PAD.left, x2: PAD.left, y1: PAD.top, y2: H - PAD.bottom, stroke: "#9aa2ae" }),
    grid,
    lines,
    all.length ? null : h("svg:text", { x: W / 2, y: H / 2, "text-anchor": "middle", fill: "#5a6270" }, "No data in this range"),
  );
  const legend = h(
    "div",
    { class: "legend", "aria-hidden": "true" },
    series.map((s, i) => h("span", { style: { "--swatch": PALETTE[i % PALETTE.length] } }, s.name)),
  );
  return h("div", { class: "card chart-card" }, h("h2", {}, title), svg, legend);
}

/**
 * graph({nodes: [id], edges: [{from, to, label, bad}]}): nodes on a circle, arrows between
 * them, each edge labelled; the aria-label lists the edges.
 */
export function graph({ title, nodes, edges }) {
  const size = 520;
  const r = nodes.length > 1 ? size / 2 - 90 : 0;
  const pos = new Map(
    nodes.map((id, i) => {
      const a = (2 * Math.PI * i) / nodes.length - Math.PI / 2;
      return [id, [size / 2 + r * Math.cos(a), size / 2 + r * Math.sin(a)]];
    }),
  );
  const marker = h(
    "svg:defs",
    {},
    h("svg:marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" }, h("svg:path", { d: "M0,0L10,5L0,10z", fill: "#5a6270" })),
  );
  const nodeR = 30;
  const lines = edges.map((e) => {
    const [x1, y1] = pos.get(e.from);
    const [x2, y2] = pos.get(e.to);
    const len = Math.hypot(x2 - x1, y2 - y1) || 1;
    const [dx, dy] = [(x2 - x1) / len, (y2 - y1) / len];
    const [sx, sy, ex, ey] = [x1 + dx * nodeR, y1 + dy * nodeR, x2 - dx * (nodeR + 2), y2 - dy * (nodeR + 2)];
    return h(
      "svg:g",
      { class: "edge" },
      h("svg:line", { x1: sx, y1: sy, x2: ex, y2: ey, stroke: e.bad ? "#d1495b" : "#5a6270", "stroke-width": 2, "marker-end": "url(#arrow)" }),
      h("svg:text", { x: (sx + ex) / 2, y: (sy + ey) / 2 - 6, "text-anchor": "middle", "font-size": 12, fill: "#1b1f24" }, e.label),
    );
  });
  const circles = nodes.map((id, i) => {
    const [cx, cy] = pos.get(id);
    return h(
      "svg:g",
      { class: "node" },
      h("svg:circle", { cx, cy, r: nodeR, fill: PALETTE[i % PALETTE.length], opacity: 0.9 }),
      h("svg:text", { x: cx, y: cy + nodeR + 16, "text-anchor": "middle", "font-size": 13, fill: "#1b1f24" }, id),
    );
  });
  const words = edges.length ? edges.map((e) => `${e.from} to ${e.to} (${e.label})`).join("; ") : "no delegations";
  return h(
    "svg:svg",
    { viewBox: `0 0 ${size} ${size}`, class: "chart topology", role: "img", "aria-label": `${title}: ${words}` },
    marker,
    lines,
    circles,
  );
}

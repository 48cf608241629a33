// The topology master's web page: plain DOM and SVG, data from the tracker-style JSON API.
"use strict";
const SVG = "http://www.w3.org/2000/svg";

// Off loopback the API wants the topology's bearer token. heron-py status prints the page's
// address with "#token=..."; the page keeps it (this browser only) and drops it from the URL.
const TOKEN_KEY = "heron-py-token:" + location.host;
(function takeToken() {
  const m = /token=([0-9a-f]+)/.exec(location.hash);
  if (m) {
    localStorage.setItem(TOKEN_KEY, m[1]);
    history.replaceState(null, "", location.pathname + location.search);
  }
})();

async function api(path) {
  const token = localStorage.getItem(TOKEN_KEY);
  const headers = token ? {Authorization: "Bearer " + token} : {};
  const r = await fetch(path, {cache: "no-store", headers});
  if (r.status === 401) {
    const t = prompt("This topology's API needs its token (heron-py status prints the page's address with it):");
    if (t) localStorage.setItem(TOKEN_KEY, t.trim());
    throw new Error("401: the API needs the topology's token");
  }
  const doc = await r.json();
  if (doc.status !== "success") throw new Error(doc.message);
  return doc.result;
}

function el(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function drawGraph(plan) {
  const svg = document.getElementById("graph");
  svg.innerHTML = "";
  const comps = {...plan.spouts, ...plan.bolts};
  const depth = {};
  const d = (name) => {
    if (depth[name] !== undefined) return depth[name];
    const ins = comps[name].inputs;
    depth[name] = ins.length ? 1 + Math.max(...ins.map((i) => d(i.component_name))) : 0;
    return depth[name];
  };
  Object.keys(comps).forEach(d);
  const cols = {};
  for (const [n, k] of Object.entries(depth)) (cols[k] = cols[k] || []).push(n);
  const pos = {};
  for (const [k, names] of Object.entries(cols)) {
    names.sort().forEach((n, i) => { pos[n] = {x: 30 + Number(k) * 220, y: 30 + i * 70}; });
  }
  for (const [name, c] of Object.entries(comps)) {
    for (const i of c.inputs) {
      const a = pos[i.component_name], b = pos[name];
      svg.appendChild(el("line", {class: "edge", x1: a.x + 140, y1: a.y + 20, x2: b.x, y2: b.y + 20,
        "data-from": i.component_name, "data-to": name}));
      svg.appendChild(el("text", {class: "edge-label", x: (a.x + 140 + b.x) / 2 - 20, y: (a.y + b.y) / 2 + 14},
        i.grouping + (i.fields.length ? "(" + i.fields.join(",") + ")" : "")));
    }
  }
  for (const [name, c] of Object.entries(comps)) {
    const g = el("g", {class: "node " + (plan.spouts[name] ? "spout" : "bolt"), "data-component": name,
      transform: `translate(${pos[name].x},${pos[name].y})`});
    g.appendChild(el("rect", {width: 140, height: 40, rx: 6}));
    g.appendChild(el("text", {x: 8, y: 25}, `${name} ×${c.par}`));
    svg.appendChild(g);
  }
}

function chart(title, cls, points, component) {
  const w = 280, h = 110, svg = el("svg", {class: "chart " + cls, width: w, height: h,
    "data-component": component, "data-metric": cls, "data-points": points.length});
  svg.appendChild(el("text", {x: 6, y: 14}, title));
  if (points.length > 1) {
    const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
    const x0 = Math.min(...xs), x1 = Math.max(...xs), ymax = Math.max(...ys, 1e-9);
    const pts = points.map(([x, y]) => `${6 + (x - x0) / Math.max(x1 - x0, 1e-9) * (w - 12)},` +
      `${h - 8 - y / ymax * (h - 30)}`).join(" ");
    svg.appendChild(el("polyline", {points: pts}));
    svg.appendChild(el("text", {x: w - 90, y: 14}, "max " + ymax.toPrecision(3)));
  }
  return svg;
}

function sumByTime(perTask, rate) {
  // per task {time: value} -> [[time, sum over tasks]]; counters become per-second rates
  const total = {};
  for (const series of Object.values(perTask || {})) {
    const ts = Object.keys(series).map(Number).sort((a, b) => a - b);
    ts.forEach((t, i) => {
      let v = series[ts[i].toFixed(3)];
      if (rate) {
        if (i === 0) return;
        v = (v - series[ts[i - 1].toFixed(3)]) / Math.max(ts[i] - ts[i - 1], 1e-3);
      }
      const k = Math.round(t);
      total[k] = (total[k] || 0) + v;
    });
  }
  return Object.keys(total).map(Number).sort((a, b) => a - b).map((k) => [k, total[k]]);
}

async function drawCharts(plan) {
  const box = document.getElementById("charts");
  const frag = document.createDocumentFragment();
  for (const name of [...Object.keys(plan.spouts), ...Object.keys(plan.bolts)]) {
    const q = `component=${encodeURIComponent(name)}&metricname=__emit-count/default&metricname=__execute-latency-ms`;
    const tl = (await api("/topologies/metrics/timeline?" + q)).timeline;
    const row = document.createElement("div");
    row.appendChild(chart(`${name}: tuples/s`, "throughput", sumByTime(tl["__emit-count/default"], true), name));
    row.appendChild(chart(`${name}: execute latency ms`, "latency", sumByTime(tl["__execute-latency-ms"], false), name));
    frag.appendChild(row);
  }
  box.replaceChildren(frag);
}

function fillTable(id, rows) {
  const body = document.querySelector(`#${id} tbody`);
  body.innerHTML = rows.map((r) => "<tr>" + r.map((c) => `<td>${c}</td>`).join("") + "</tr>").join("");
}

async function refresh() {
  try {
    const [plan, es, exc] = await Promise.all([api("/topologies/logicalplan"), api("/topologies/execution_state"),
      api("/topologies/exceptions")]);
    document.getElementById("title").textContent = "heron-py: " + es.topology;
    document.getElementById("state").textContent = `${es.state}, plan v${es.pplan_version}`;
    drawGraph(plan);
    fillTable("tasks", Object.entries(es.instances).map(([t, i]) =>
      [t, i.component, i.container, i.pid, i.ready ? "yes" : "no"]));
    fillTable("backpressure", Object.entries(es.stmgr_metrics).map(([c, m]) => [c,
      m.in_backpressure ? '<span class="bp-on">IN BACKPRESSURE</span>' : (m.spouts_paused ? "spouts paused" : "ok"),
      ((m.time_spent_back_pressure_ms || 0) / 1000).toFixed(1) + " s", m.backpressure_cause || "",
      m.dropped_tuples || 0]));
    const ex = document.getElementById("exceptions");
    ex.innerHTML = exc.length ? "" : "none";
    for (const e of exc.slice(-10)) {
      const d = document.createElement("div");
      d.className = "exception";
      d.dataset.task = e.task;
      d.innerHTML = `<b>task ${e.task} (${e.component})</b>, ${e.count} times`;
      const pre = document.createElement("pre");
      pre.className = "trace";
      pre.textContent = e.stacktrace;
      d.appendChild(pre);
      ex.appendChild(d);
    }
    await drawCharts(plan);
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (err) {
    document.getElementById("updated").textContent = "error: " + err.message;
  }
}

refresh();
setInterval(refresh, 2000);

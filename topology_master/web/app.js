// The topology master's web page: plain DOM and SVG (no build step, no library), data from the
// JSON API (http_api.py, ui_api.py). Every number shown comes from one request per refresh.
"use strict";
const SVG = "http://www.w3.org/2000/svg";

// The API wants a bearer token off loopback (the read or the admin token), for a task's log from
// another user of the host, and for actions everywhere (the admin token). heron-py status prints
// the page's address with "#token=..." (admin) and a read-only one; the page keeps the token
// (this browser only) and drops it from the address bar.
const TOKEN_KEY = "heron-py-token:" + location.host;
(function takeToken() {
  const m = /token=([0-9a-f]+)/.exec(location.hash);
  if (m) {
    localStorage.setItem(TOKEN_KEY, m[1]);
    history.replaceState(null, "", location.pathname + location.search);
  }
})();

function authHeaders() {
  const token = localStorage.getItem(TOKEN_KEY);
  return token ? {Authorization: "Bearer " + token} : {};
}

async function api(path, method) {
  const r = await fetch(path, {cache: "no-store", method: method || "GET", headers: authHeaders()});
  if (r.status === 401) {
    const why = await r.text();
    const t = prompt(why + "\n\nThe topology's token:");
    if (t) localStorage.setItem(TOKEN_KEY, t.trim());
    throw new Error("401: " + why);
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

function html(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// ---- formatting ----
const num = (v) => (v === null || v === undefined ? "–" : Number(v).toLocaleString("en-US"));
const counted = (n, noun) => num(n) + " " + noun + (n === 1 ? "" : "s");
const ms = (v) => (v === null || v === undefined ? "–" : Number(v).toFixed(3));
function bytes(v) {
  if (!v) return "–";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return v.toFixed(i ? 1 : 0) + " " + units[i];
}
function duration(s) {
  if (s === null || s === undefined) return "–";
  s = Math.floor(s);
  const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  return (d ? d + "d " : "") + (d || h ? h + "h " : "") + (d || h || m ? m + "m " : "") + (s % 60) + "s";
}
function clock(t, withSeconds) {
  const d = new Date(t * 1000);
  const p = (n) => String(n).padStart(2, "0");
  return p(d.getHours()) + ":" + p(d.getMinutes()) + (withSeconds ? ":" + p(d.getSeconds()) : "");
}
const WINDOW_NAMES = {"600": "10 min", "10800": "3 h", "86400": "1 day", "all": "all time"};

// ---- the logical plan ----
function grouping(i) {
  return i.grouping + (i.fields.length ? "(" + i.fields.join(",") + ")" : "");
}

function layout(plan) {
  const comps = {...plan.spouts, ...plan.bolts};
  const depth = {};
  const d = (name) => {
    if (depth[name] !== undefined) return depth[name];
    depth[name] = 0;  // a cycle stops here
    const ins = comps[name].inputs.filter((i) => comps[i.component_name]);
    depth[name] = ins.length ? 1 + Math.max(...ins.map((i) => d(i.component_name))) : 0;
    return depth[name];
  };
  Object.keys(comps).forEach(d);
  const cols = {};
  for (const [n, k] of Object.entries(depth)) (cols[k] = cols[k] || []).push(n);
  // widths from the text itself, so no name and no grouping label is ever cut
  const nodeW = Math.max(140, ...Object.entries(comps).map(([n, c]) => 7.5 * `${n} ×${c.par}`.length + 40));
  const labelW = Math.max(60, ...Object.values(comps).flatMap((c) => c.inputs.map((i) => 6.5 * grouping(i).length)));
  const pos = {};
  for (const [k, names] of Object.entries(cols)) {
    names.sort().forEach((n, i) => { pos[n] = {x: 20 + Number(k) * (nodeW + labelW + 60), y: 30 + i * 80}; });
  }
  return {comps, pos, nodeW};
}

function drawGraph(plan, summary) {
  const svg = document.getElementById("graph");
  svg.replaceChildren();
  const {comps, pos, nodeW} = layout(plan);
  const rows = summary.components;
  for (const [name, c] of Object.entries(comps)) {
    for (const i of c.inputs) {
      const a = pos[i.component_name], b = pos[name];
      if (!a) continue;
      svg.appendChild(el("line", {class: "edge", x1: a.x + nodeW, y1: a.y + 20, x2: b.x, y2: b.y + 20,
        "data-from": i.component_name, "data-to": name}));
      const label = el("text", {class: "edge-label", x: (a.x + nodeW + b.x) / 2, y: (a.y + b.y) / 2 + 14,
        "text-anchor": "middle"}, grouping(i));
      svg.appendChild(label);
    }
  }
  for (const [name, c] of Object.entries(comps)) {
    const row = rows[name] || {};
    const g = el("g", {class: "node " + (plan.spouts[name] ? "spout" : "bolt"), "data-component": name,
      "data-backpressure": String(!!row.backpressure), "data-exceptions": String(!!row.recent_exceptions),
      transform: `translate(${pos[name].x},${pos[name].y})`});
    g.appendChild(el("rect", {width: nodeW, height: 40, rx: 6}));
    g.appendChild(el("text", {x: 8, y: 25}, `${name} ×${c.par}`));
    let bx = nodeW - 4;
    if (row.recent_exceptions) {
      g.appendChild(el("text", {class: "badge-exc", x: bx, y: -4, "text-anchor": "end"}, "⚠ exceptions"));
      bx -= 90;
    }
    if (row.backpressure) g.appendChild(el("text", {class: "badge-bp", x: bx, y: -4, "text-anchor": "end"},
      "● backpressure"));
    const tip = [`${name}: ${plan.spouts[name] ? "spout" : "bolt"}, ${counted(c.par, "task")}`];
    if (row.backpressure) tip.push("a container of its tasks is in backpressure");
    if (row.recent_exceptions) tip.push("exceptions in the last 10 minutes");
    g.appendChild(el("title", {}, tip.join("\n")));
    svg.appendChild(g);
  }
  // the drawing's own box: nothing drawn is outside the viewport
  const box = svg.getBBox();
  svg.setAttribute("viewBox", `${Math.min(0, box.x - 10)} ${Math.min(0, box.y - 10)} ${box.width + 30} ${box.height + 30}`);
  svg.setAttribute("width", box.width + 30);
  svg.setAttribute("height", box.height + 30);
}

// ---- charts: time axis, value axis with unit, hover ----
function niceMax(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((c) => c >= v);
}

function chart(title, cls, series, component) {
  const w = 380, h = 170, L = 58, R = 12, T = 24, B = 28;
  // a bucket's value holds over the time it covers: draw steps, one point at each end
  const pts = [];
  for (const [t0, t1, v] of series.points) pts.push([t0, v], [t1, v]);
  const svg = el("svg", {class: "chart " + cls, width: w, height: h, "data-component": component,
    "data-metric": cls, "data-points": pts.length, "data-unit": series.unit});
  svg.appendChild(el("text", {class: "chart-title", x: 6, y: 15}, `${title} (${series.unit})`));
  const plotW = w - L - R, plotH = h - T - B;
  if (!pts.length) {
    svg.appendChild(el("text", {x: L + 10, y: T + plotH / 2}, "no reports in this window yet"));
    return svg;
  }
  const x0 = pts[0][0], x1 = Math.max(pts[pts.length - 1][0], x0 + 1);
  const ymax = niceMax(Math.max(...pts.map((p) => p[1])));
  const X = (t) => L + (t - x0) / (x1 - x0) * plotW, Y = (v) => T + plotH - v / ymax * plotH;
  for (let i = 0; i <= 4; i++) {
    const v = ymax * i / 4;
    svg.appendChild(el("line", {class: "grid", x1: L, x2: L + plotW, y1: Y(v), y2: Y(v)}));
    svg.appendChild(el("text", {class: "tick", x: L - 4, y: Y(v) + 4, "text-anchor": "end"},
      v >= 1000 ? (v / 1000).toPrecision(3) + "k" : +v.toPrecision(3)));
  }
  const secs = x1 - x0 < 1200;
  for (let i = 0; i <= 4; i++) {
    const t = x0 + (x1 - x0) * i / 4;
    // the outer labels inside the chart: the last one ends at the axis' end, not past the edge
    const anchor = i === 0 ? "start" : (i === 4 ? "end" : "middle");
    svg.appendChild(el("text", {class: "tick", x: X(t), y: h - 10, "text-anchor": anchor}, clock(t, secs)));
  }
  svg.appendChild(el("line", {class: "axis", x1: L, x2: L, y1: T, y2: T + plotH}));
  svg.appendChild(el("line", {class: "axis", x1: L, x2: L + plotW, y1: T + plotH, y2: T + plotH}));
  svg.appendChild(el("polyline", {points: pts.map(([t, v]) => `${X(t)},${Y(v)}`).join(" ")}));
  // hover: the bucket under the pointer, its time and value
  const cursor = el("line", {class: "cursor", y1: T, y2: T + plotH, visibility: "hidden"});
  const tip = el("text", {class: "hover", x: L + 4, y: T + 12});
  const hit = el("rect", {x: L, y: T, width: plotW, height: plotH, fill: "transparent"});
  hit.addEventListener("mousemove", (ev) => {
    const r = svg.getBoundingClientRect();
    const t = x0 + (ev.clientX - r.left - L) / plotW * (x1 - x0);
    const p = series.points.filter(([s]) => s <= t).pop() || series.points[0];
    cursor.setAttribute("x1", X(t)); cursor.setAttribute("x2", X(t));
    cursor.setAttribute("visibility", "visible");
    tip.textContent = `${clock(p[0], true)}–${clock(p[1], true)}: ${+p[2].toPrecision(4)} ${series.unit}`;
  });
  hit.addEventListener("mouseleave", () => { cursor.setAttribute("visibility", "hidden"); tip.textContent = ""; });
  svg.append(cursor, tip, hit);
  return svg;
}

async function drawCharts(plan, win) {
  const box = document.getElementById("charts");
  const frag = document.createDocumentFragment();
  for (const name of [...Object.keys(plan.spouts), ...Object.keys(plan.bolts)]) {
    const spout = !!plan.spouts[name];
    const q = (m) => `/topologies/series?component=${encodeURIComponent(name)}&metric=${m}&window=${win}`;
    const [thr, lat] = await Promise.all([api(q(spout ? "emitted" : "executed")),
      api(q(spout ? "complete_ms" : "exec_ms"))]);
    const row = html("div", {class: "chart-row"});
    row.appendChild(chart(`${name}: ${spout ? "emitted" : "executed"}`, "throughput", thr, name));
    row.appendChild(chart(`${name}: ${spout ? "complete" : "execute"} latency`, "latency", lat, name));
    frag.appendChild(row);
  }
  box.replaceChildren(frag);
}

// ---- tables ----
function fillRows(id, rows) {
  // rows: [{key, cells: [[column, text, raw?], ...]}]; data-col/data-value let tests and tools read raw values
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren(...rows.map((r) => {
    const tr = html("tr", r.key !== undefined ? {"data-key": r.key} : {});
    for (const [col, text, raw] of r.cells) {
      const td = html("td", {"data-col": col});
      if (raw !== undefined && raw !== null) td.dataset.value = raw;
      if (text instanceof Node) td.appendChild(text); else td.textContent = text;
      tr.appendChild(td);
    }
    return tr;
  }));
}

function stateCell(row) {
  const s = html("span");
  if (row.backpressure) s.appendChild(html("span", {class: "mark bp"}, "backpressure"));
  if (row.recent_exceptions) s.appendChild(html("span", {class: "mark exc"}, "exceptions"));
  if (!s.childNodes.length) s.textContent = "ok";
  return s;
}

function fillComponents(summary, es) {
  const comps = Object.entries(summary.components);
  fillRows("spouts", comps.filter(([, r]) => r.kind === "spout").map(([n, r]) => ({key: n, cells: [
    ["component", n], ["tasks", num(r.tasks)], ["emitted", num(r.emitted), r.emitted],
    ["transferred", num(r.transferred), r.transferred], ["complete_latency_ms", ms(r.complete_latency_ms)],
    ["acked", num(r.acked), r.acked], ["failed", num(r.failed), r.failed], ["state", stateCell(r)]]})));
  fillRows("bolts", comps.filter(([, r]) => r.kind === "bolt").map(([n, r]) => ({key: n, cells: [
    ["component", n], ["tasks", num(r.tasks)], ["executed", num(r.executed), r.executed],
    ["execute_latency_ms", ms(r.execute_latency_ms)], ["process_latency_ms", ms(r.process_latency_ms)],
    ["capacity", ms(r.capacity), r.capacity],
    ["emitted", num(r.emitted), r.emitted], ["transferred", num(r.transferred), r.transferred],
    ["acked", num(r.acked), r.acked], ["failed", num(r.failed), r.failed], ["state", stateCell(r)]]})));
  fillRows("summary", [{cells: summaryCells(summary, es)}]);
  fillCheckpoints(es.checkpoints);
}

// The topology's totals, as Storm UI's topology summary shows them: emitted and transferred
// over every component, acked and failed the spouts' (a tuple tree is acked once, at its spout;
// every bolt on its way acks its own tuple of it, so the bolts' acks would count it again per
// bolt). Pure, so a test can call it with the API's documents.
function summaryCells(summary, es) {
  const comps = Object.values(summary.components);
  const sum = (k, kind) => comps.reduce((a, r) => a + (kind && r.kind !== kind ? 0 : r[k] || 0), 0);
  const total = (col, k, kind) => { const v = sum(k, kind); return [col, num(v), v]; };
  return [["name", es.topology], ["state", es.state], ["plan", "v" + es.pplan_version],
    ["containers", num(Object.keys(es.stmgrs).length)], ["tasks", num(Object.keys(es.instances).length)],
    ["window", WINDOW_NAMES[summary.window]], total("emitted", "emitted"), total("transferred", "transferred"),
    total("acked", "acked", "spout"), total("failed", "failed", "spout")];
}

// effectively once: the last completed checkpoint and its cost (absent in the other modes)
function fillCheckpoints(c) {
  const p = document.getElementById("checkpoints");
  if (!c) { p.hidden = true; return; }
  let text = "Effectively once: " + c.state + "; ";
  if (c.last_completed_id === null) {
    text += "no checkpoint completed yet";
  } else {
    text += "last completed checkpoint " + c.last_completed_id;
    if (c.last_completed_time) text += " at " + new Date(c.last_completed_time * 1000).toLocaleTimeString();
    if (c.last_duration_secs !== null) text += ", " + ms(c.last_duration_secs * 1000) + " ms, " + num(c.last_size_bytes) + " bytes";
  }
  if (c.waiting_for_operator) {
    text += "; waiting for the operator: " + (c.failure || "no checkpoint could be loaded") +
      "; run heron-py restore NAME --checkpoint ID | --clean";
  } else if (c.failure) {
    text += "; FAILED: " + c.failure;
  }
  if (c.failing) {
    const reasons = c.failure_reasons || [];
    text += "; FAILING: " + c.consecutive_failures + " checkpoints failed in a row" +
      (reasons.length ? " (" + reasons[reasons.length - 1] + ")" : "");
  }
  p.textContent = text;
  p.hidden = false;
}

function fillTasks(tasks) {
  fillRows("tasks", Object.entries(tasks.tasks).map(([t, r]) => {
    const link = html("a", {href: "#log-" + t, class: "log-link", "data-task": t}, "log");
    link.addEventListener("click", (ev) => { ev.preventDefault(); openLog(t, null); });
    return {key: t, cells: [["task", t], ["component", r.component], ["host", r.host || "–"],
      ["container", r.container], ["pid", r.pid || "–"], ["uptime", duration(r.uptime_s), r.uptime_s],
      ["restarts", num(r.restarts)], ["emitted", num(r.emitted), r.emitted],
      ["executed", r.executed === undefined ? "–" : num(r.executed), r.executed],
      ["acked", num(r.acked), r.acked], ["failed", num(r.failed), r.failed],
      ["latency", ms(r.complete_latency_ms !== undefined ? r.complete_latency_ms : r.execute_latency_ms)],
      ["capacity", r.capacity === undefined ? "–" : ms(r.capacity)], ["rss", bytes(r.rss_bytes), r.rss_bytes],
      ["cpu", r.cpu_percent === undefined ? "–" : r.cpu_percent + " %", r.cpu_percent], ["log", link]]};
  }));
}

// Kafka lag per KafkaSpout task (tasks with no kafka_lag are not Kafka spouts): pure, so a
// test can call it with a tasks document
function kafkaLagRows(tasks) {
  return Object.entries(tasks.tasks).filter(([, r]) => r.kafka_lag).map(([t, r]) => {
    const parts = Object.entries(r.kafka_lag);
    const total = parts.reduce((a, [, v]) => a + v, 0);
    return {key: t, cells: [["task", t], ["component", r.component], ["partitions", num(parts.length), parts.length],
      ["lag", num(total), total], ["by-partition", parts.map(([p, v]) => p + ": " + num(v)).join(", ")]]};
  });
}

function fillKafkaLag(tasks) {
  const rows = kafkaLagRows(tasks);
  document.getElementById("kafka-section").hidden = rows.length === 0;
  fillRows("kafka-lag", rows);
}

// ---- logs ----
const LOG_PAGE = 16384;
let logState = null;  // {task, offset}

async function openLog(task, offset) {
  const q = `/topologies/logs?task=${task}&length=${LOG_PAGE}` + (offset === null ? "" : `&offset=${offset}`);
  const view = document.getElementById("log-view");
  view.hidden = false;
  try {
    const r = await api(q);
    logState = {task, offset: r.offset};
    document.getElementById("log-title").textContent = `Log of task ${r.task} (${r.component})`;
    document.getElementById("log-info").textContent =
      `${r.file}: bytes ${num(r.offset)}–${num(r.next_offset)} of ${num(r.size)}`;
    const pre = document.getElementById("log-text");
    pre.dataset.task = r.task;
    pre.textContent = r.data;
    document.getElementById("log-older").disabled = r.offset === 0;
    if (offset === null) pre.scrollTop = pre.scrollHeight;
    view.scrollIntoView();
  } catch (err) {
    document.getElementById("log-text").textContent = "error: " + err.message;
  }
}
document.getElementById("log-older").addEventListener("click", () =>
  logState && openLog(logState.task, Math.max(0, logState.offset - LOG_PAGE)));
document.getElementById("log-tail").addEventListener("click", () => logState && openLog(logState.task, null));
document.getElementById("log-close").addEventListener("click", () => {
  document.getElementById("log-view").hidden = true; logState = null;
});

// ---- actions, each after a confirmation ----
function confirmAction(text) {
  const dlg = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), {once: true});
    dlg.showModal();
  });
}

for (const b of document.querySelectorAll("button[data-action]")) {
  b.addEventListener("click", async () => {
    const action = b.dataset.action;
    const k = document.getElementById("restart-container").value;
    const name = document.getElementById("title").dataset.topology || "this topology";
    const what = action === "restart" ? `restart container ${k} of '${name}'` : `${action} '${name}'`;
    const out = document.getElementById("action-result");
    if (!await confirmAction(`Really ${what}?`)) { out.textContent = `${action}: cancelled`; return; }
    try {
      const r = await api(`/topologies/actions/${action}` + (action === "restart" ? `?container=${k}` : ""), "POST");
      out.textContent = r.message;
      out.className = "ok";
    } catch (err) {
      out.textContent = `${action} failed: ${err.message}`;
      out.className = "error";
    }
    refresh();
  });
}

// ---- refresh ----
function fillBackpressure(es) {
  fillRows("backpressure", Object.entries(es.stmgr_metrics).map(([c, m]) => ({key: c, cells: [["container", c],
    ["state", m.in_backpressure ? "IN BACKPRESSURE" : (m.spouts_paused ? "spouts paused" : "ok")],
    ["time", ((m.time_spent_back_pressure_ms || 0) / 1000).toFixed(1) + " s"], ["cause", m.backpressure_cause || ""],
    ["dropped", num(m.dropped_tuples || 0)]]})));
}

function fillExceptions(exc) {
  const ex = document.getElementById("exceptions");
  ex.replaceChildren();
  if (!exc.length) ex.textContent = "none";
  for (const e of exc.slice(-10)) {
    const d = html("div", {class: "exception", "data-task": e.task});
    d.appendChild(html("b", {}, `task ${e.task} (${e.component})`));
    d.append(`, ${e.count} times, last at ${e.lasttime ? clock(e.lasttime, true) : "?"}`);
    d.appendChild(html("pre", {class: "trace"}, e.stacktrace));
    ex.appendChild(d);
  }
}

// ---- the health manager (heron-py autoscale): its last steps, as its record holds them ----
const HEALTH_STEPS = 20;

// a step's diagnoses by component: [[component, [[label, kind, explanation], ...]], ...]
function diagnosesByComponent(diagnoses) {
  const by = {};
  for (const d of diagnoses) {
    const task = d.task === null || d.task === undefined ? "" : ` (task ${d.task})`;
    (by[d.component] = by[d.component] || []).push([d.kind + task, d.kind, d.explanation || ""]);
  }
  return Object.entries(by);
}

function diagnosesCell(diagnoses) {
  const box = html("span");
  const byComponent = diagnosesByComponent(diagnoses);
  if (!byComponent.length) box.textContent = "none";
  for (const [comp, ds] of byComponent) {
    const line = html("div", {class: "diagnosis", "data-component": comp});
    line.append(comp + ": ");
    ds.forEach(([label, kind, explanation], i) => {
      if (i) line.append(", ");
      line.appendChild(html("span", {class: "mark diag", "data-kind": kind, title: explanation}, label));
    });
    box.appendChild(line);
  }
  return box;
}

// what the step decided, and why: for no action, the cooldown, the blacklist, the plan awaited...
function actionText(step) {
  const a = step.action || {};
  if (step.decision === "no observation") return ["no observation", step.error || ""];
  if (a.kind === "scale") {
    const running = step.parallelism || {};
    return ["scale " + Object.entries(a.parallelism || {}).map(([c, n]) => `${c} ${running[c] ?? "?"} → ${n}`)
      .join(", "), a.why || ""];
  }
  if (a.kind === "restart") return ["restart container " + a.container, a.why || ""];
  return ["none", a.why || ""];
}

function actionCell(step) {
  const [what, why] = actionText(step);
  const box = html("span");
  box.appendChild(html("div", {class: "what"}, what));
  if (why) box.appendChild(html("div", {class: "why"}, why));
  return box;
}

function outcomeText(step) {
  const o = step.outcome;
  if (o === null || o === undefined) return "–";
  if (o.dry_run) return "dry run: not carried out";
  return o.ok ? "done: " + o.message : "FAILED: " + o.error;
}

// one row per step, newest first (a step's fields as the record holds them; a line edited by
// hand that lacks one still shows); components in the plan's order (the record sorts them by name)
function healthRows(doc, components) {
  const at = (c) => (components.includes(c) ? components.indexOf(c) : components.length);
  const running = (s) => Object.entries(s.parallelism || {}).sort(([a], [b]) => at(a) - at(b));
  return doc.steps.slice().reverse().map((s) => ({key: String(s.time), cells: [
    ["time", clock(s.time, true), s.time],
    ["running", running(s).map(([c, n]) => `${c} ${n}`).join(", ") || "–"],
    ["diagnoses", diagnosesCell(Array.isArray(s.diagnoses) ? s.diagnoses : [])], ["action", actionCell(s)],
    ["outcome", outcomeText(s)]]}));
}

function fillHealth(doc, plan) {
  const none = doc.steps.length === 0;
  document.getElementById("health-none").hidden = !none;
  document.getElementById("health-steps").hidden = none;
  fillRows("health-steps", healthRows(doc, [...Object.keys(plan.spouts), ...Object.keys(plan.bolts)]));
}

let refreshing = false;
async function refresh() {
  if (refreshing) return;
  refreshing = true;
  const win = document.getElementById("window").value;
  try {
    const [plan, es, exc, summary, tasks, health] = await Promise.all([api("/topologies/logicalplan"),
      api("/topologies/execution_state"), api("/topologies/exceptions"),
      api("/topologies/componentsummary?window=" + win), api("/topologies/tasks?window=" + win),
      api("/topologies/autoscale?last=" + HEALTH_STEPS)]);
    const title = document.getElementById("title");
    title.textContent = "heron-py: " + es.topology;
    title.dataset.topology = es.topology;
    const state = document.getElementById("state");
    state.textContent = es.state;
    state.className = "badge " + es.state.toLowerCase();
    const sel = document.getElementById("restart-container");
    const containers = Object.keys(es.stmgrs).sort((a, b) => a - b);
    if (sel.options.length !== containers.length) {
      sel.replaceChildren(...containers.map((c) => html("option", {value: c}, "container " + c)));
    }
    document.getElementById("chart-window").textContent = WINDOW_NAMES[win === "all" ? "86400" : win];
    fillComponents(summary, es);
    drawGraph(plan, summary);
    fillTasks(tasks);
    fillKafkaLag(tasks);
    fillBackpressure(es);
    fillExceptions(exc);
    fillHealth(health, plan);
    await drawCharts(plan, win);
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (err) {
    document.getElementById("updated").textContent = "error: " + err.message;
  } finally {
    refreshing = false;
  }
}

document.getElementById("window").addEventListener("change", refresh);
refresh();
setInterval(refresh, 3000);

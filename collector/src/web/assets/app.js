// The netaware web view: one page, five views (overview, heat map,
// faults, blocks, a job's placement), each read from the collector's JSON
// API under /api/v1/, whose answers are the documents that `netaware ...
// -o json` prints. The page judges nothing itself: colours, verdicts,
// reasons and fault texts come from the collector; it lays them out.
//
// The route is in the address's fragment (#/heatmap?zone=a&metric=loss),
// so that a view can be bookmarked and the back button works; the network
// is one of its parameters. The view in front is read again every
// REFRESH_MS while the page is visible.
"use strict";

const REFRESH_MS = 10000;
const API = "../api/v1/";

// ---- small helpers ------------------------------------------------------

// An element with attributes and children (strings become text: nothing
// from the network is ever parsed as HTML).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function ms(value) {
  return value === null || value === undefined ? "-" : value.toFixed(3) + " ms";
}
function percent(value) {
  return value === null || value === undefined ? "-" : (value * 100).toFixed(2) + "%";
}
function rate(bps) {
  if (bps === null || bps === undefined) return "-";
  return bps >= 1e9 ? (bps / 1e9).toFixed(2) + " Gbit/s" : (bps / 1e6).toFixed(1) + " Mbit/s";
}
function fixed(value, digits) {
  return value === null || value === undefined ? "-" : value.toFixed(digits);
}
function age(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  return seconds < 120 ? seconds.toFixed(0) + " s" : (seconds / 60).toFixed(0) + " min";
}
function since(unixMs) {
  return age(Math.max(0, (Date.now() - unixMs) / 1000)) + " ago";
}

// A table: columns are [header, cell(row), figure?]; rows may carry a class.
function table(columns, rows, rowClass) {
  return el("table", {},
    el("thead", {}, el("tr", {}, columns.map(([header, , figure]) =>
      el("th", { class: figure ? "figure" : null }, header)))),
    el("tbody", {}, rows.map((row) => el("tr", { class: rowClass ? rowClass(row) : null },
      columns.map(([, cell, figure]) => {
        const value = cell(row);
        return el("td", { class: figure ? "figure" : (figure === false ? "why" : null) }, value);
      })))));
}

// ---- the route ----------------------------------------------------------

function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [page, query] = hash.split("?");
  return { page: page || "overview", params: new URLSearchParams(query || "") };
}

function link(page, params) {
  const query = new URLSearchParams(params);
  if (!query.has("network") && currentNetwork() !== "primary") query.set("network", currentNetwork());
  const text = query.toString();
  return "#/" + (page === "overview" ? "" : page) + (text ? "?" + text : "");
}

function go(page, params) {
  location.hash = link(page, params);
}

function currentNetwork() {
  return route().params.get("network") || "primary";
}

// ---- the API ------------------------------------------------------------

class ApiError extends Error {}

async function api(path, params) {
  const query = new URLSearchParams(params || {});
  query.set("network", query.get("network") || currentNetwork());
  const response = await fetch(API + path + "?" + query.toString(), { headers: { accept: "application/json" } });
  const body = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new ApiError(body.error || response.statusText);
  return body;
}

// ---- the frame ----------------------------------------------------------

const main = () => document.getElementById("main");
let shownAt = 0;
let rendering = 0;

function setStatus(text, failing) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.classList.toggle("failing", Boolean(failing));
}

async function loadNetworks() {
  const answer = await api("networks", { network: "primary" });
  const select = document.getElementById("network");
  const chosen = currentNetwork();
  select.replaceChildren(...answer.networks.map((name) =>
    el("option", { value: name, selected: name === chosen }, name)));
  if (!answer.networks.includes(chosen)) {
    select.append(el("option", { value: chosen, selected: true }, chosen + " (not measured)"));
  }
  return answer;
}

const pages = { overview, heatmap, faults, blocks, job };

// Draws the view the route names; `again` for the periodic refresh, which
// keeps what the reader was doing (a form, a hover).
async function render(again) {
  const { page, params } = route();
  const draw = pages[page] || overview;
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("current", a.dataset.page === (pages[page] ? page : "overview"));
    a.setAttribute("href", link(a.dataset.page, {}));
  }
  const tooltip = document.getElementById("tooltip");
  if (tooltip && !again) tooltip.style.display = "none";
  const turn = ++rendering;
  try {
    const networks = await loadNetworks();
    const view = await draw(params, again);
    if (turn !== rendering) return;
    if (view) main().replaceChildren(view);
    shownAt = Date.now();
    setStatus(`${networks.nodes} nodes · collector ${networks.collector_version} · updated ${new Date().toLocaleTimeString()}`);
  } catch (err) {
    if (turn !== rendering) return;
    if (!(err instanceof ApiError) && !(err instanceof TypeError)) throw err;
    setStatus("collector unreachable or refused: " + err.message, true);
    if (!again) main().replaceChildren(el("p", { class: "error" }, err.message));
  }
}

// ---- overview: zones, their health, the worst pairs ----------------------

async function overview() {
  const [zones, faultList, topology, worst] = await Promise.all([
    api("zones"), api("faults"), api("topology"), api("worst", { limit: 20 }),
  ]);
  const degraded = topology.zones.flatMap((z) => z.blocks.flatMap((b) => b.degraded));
  const nodes = zones.zones.reduce((sum, z) => sum + z.nodes, 0);
  const fresh = zones.zones.reduce((sum, z) => sum + z.fresh_nodes, 0);
  const inside = new Map(zones.zone_pairs.filter((p) => p.src_zone === p.dst_zone).map((p) => [p.src_zone, p]));
  const faultsIn = (zone) => faultList.faults.filter((f) => f.zones.includes(zone)).length;
  const card = (label, figure, bad) => el("div", { class: "card" + (bad ? " bad" : "") },
    el("div", { class: "figure" }, figure), el("div", { class: "quiet" }, label));
  const zoneNames = zones.zones.map((z) => z.name);
  const between = (src, dst) => zones.zone_pairs.find((p) => p.src_zone === src && p.dst_zone === dst);
  return el("div", {},
    zones.cannot_measure ? el("div", { class: "banner" },
      "netaware cannot measure most nodes (probes do not get through): placement fails open. See netaware doctor.") : null,
    el("div", { class: "cards" },
      card("zones", zones.zones.length),
      card("nodes", nodes),
      card("fresh nodes", fresh, fresh < nodes),
      card("unreached nodes", zones.unreached_nodes, zones.unreached_nodes > 0),
      card("open faults", faultList.faults.length, faultList.faults.length > 0),
      card("degraded nodes", degraded.length, degraded.length > 0)),
    el("h2", {}, "Zones"),
    table([
      ["zone", (z) => el("a", { href: link("heatmap", { zone: z.name }) }, z.name)],
      ["region", (z) => z.region || "-"],
      ["nodes", (z) => z.nodes, true],
      ["fresh", (z) => z.fresh_nodes, true],
      ["unreached", (z) => z.unreached_nodes, true],
      ["RTT inside", (z) => ms(inside.get(z.name)?.rtt_median_ms), true],
      ["loss inside", (z) => percent(inside.get(z.name)?.loss_ratio), true],
      ["goodput inside", (z) => rate(inside.get(z.name)?.throughput_bps), true],
      ["quality inside", (z) => fixed(inside.get(z.name)?.quality, 3), true],
      ["faults", (z) => faultsIn(z.name), true],
      ["state", (z) => z.cannot_measure ? el("span", { class: "bad" }, "cannot measure") : "measured"],
    ], zones.zones),
    el("h2", {}, "Between zones (mean median RTT, mean quality)"),
    table([
      ["from \\ to", (src) => src],
      ...zoneNames.map((dst) => [dst, (src) => {
        const pair = between(src, dst);
        return pair ? `${ms(pair.rtt_median_ms)} · ${fixed(pair.quality, 2)}` : "-";
      }, true]),
    ], zoneNames),
    el("h2", {}, "Worst pairs"),
    worst.pairs.length === 0 ? el("p", { class: "quiet" }, "No measured pairs yet.") : pairTable(worst.pairs));
}

function pairTable(pairs) {
  return table([
    ["from", (p) => p.src],
    ["to", (p) => p.dst],
    ["RTT median", (p) => ms(p.rtt_median_ms), true],
    ["RTT p99", (p) => ms(p.rtt_p99_ms), true],
    ["loss", (p) => percent(p.loss_ratio), true],
    ["goodput", (p) => rate(p.throughput_bps), true],
    ["quality", (p) => fixed(p.quality, 3), true],
    ["probe", (p) => p.probe || "-"],
    ["age", (p) => age(p.age_s), true],
  ], pairs);
}

// ---- heat map -------------------------------------------------------------

const METRICS = ["quality", "rtt", "loss", "goodput"];
const pairCache = new Map();

async function heatmap(params, again) {
  const [zones, topology] = await Promise.all([api("zones"), api("topology")]);
  if (zones.zones.length === 0) return el("p", { class: "quiet" }, "No nodes yet.");
  const zone = params.get("zone") || "";
  const metric = METRICS.includes(params.get("metric")) ? params.get("metric") : "quality";
  const block = params.get("block") || "";
  const offset = Number(params.get("offset") || 0);
  const query = { zone, metric, offset };
  if (block && zone) query.block = block;
  const answer = await api("heatmap", query);
  if (again) pairCache.clear();
  const here = { zone, metric, block, offset };
  const move = (change) => go("heatmap", Object.fromEntries(
    Object.entries({ ...here, ...change }).filter(([, v]) => v !== "" && v !== 0)));
  const blocksOfZone = topology.zones.find((z) => z.name === zone)?.blocks || [];
  const select = (label, value, options, onchange) => el("label", {}, label + " ",
    el("select", { "aria-label": label, onchange: (e) => onchange(e.target.value) },
      options.map(([v, text]) => el("option", { value: v, selected: String(v) === String(value) }, text))));
  const page = answer.map.nodes.length;
  const counts = Object.fromEntries(answer.cells_by_basis);
  return el("div", {},
    el("div", { class: "controls" },
      select("zone", zone, [["", "every zone"], ...zones.zones.map((z) => [z.name, `${z.name} (${z.nodes})`])],
        (v) => move({ zone: v, block: "", offset: 0 })),
      zone ? select("block", block, [["", "all blocks"], ...blocksOfZone.map((b) => [b.number, `block ${b.number} (${b.nodes.length})`])],
        (v) => move({ block: v, offset: 0 })) : null,
      select("metric", metric, METRICS.map((m) => [m, m]), (v) => move({ metric: v })),
      el("span", { class: "quiet" }, `nodes ${answer.total ? answer.offset + 1 : 0}–${answer.offset + page} of ${answer.total}`),
      answer.offset > 0 ? el("button", { type: "button", onclick: () => move({ offset: Math.max(0, answer.offset - page) }) }, "previous") : null,
      answer.offset + page < answer.total ? el("button", { type: "button", onclick: () => move({ offset: answer.offset + page }) }, "next") : null),
    drawMap(answer),
    el("div", { class: "legend" },
      el("span", {}, answer.map.scale[0], el("span", { class: "gradient" }), answer.map.scale[1]),
      el("span", {}, el("span", { class: "swatch estimated" }), `estimated, paler (${counts.estimated || 0})`),
      el("span", {}, el("span", { class: "swatch missing" }), `no figure (${counts.missing || 0})`),
      el("span", {}, `measured (${counts.measured || 0})`),
      answer.map.faults.some((f) => f) ? el("span", { class: "bad" }, "red names: a network fault") : null),
    el("p", { class: "quiet" }, "Rows probe, columns are probed; nodes go zone by zone and block by block, thick lines between zones, thin between blocks. Hover a cell for the pair's figures."));
}

// The map on a canvas: cells in the colours the collector chose, names
// along both sides (faulty ones in red), lines between blocks.
function drawMap(answer) {
  const map = answer.map;
  const n = map.nodes.length;
  const cell = Math.max(4, Math.min(40, Math.floor(760 / Math.max(n, 1))));
  const font = Math.min(12, Math.max(8, cell - 2));
  const probe = document.createElement("canvas").getContext("2d");
  probe.font = `${font}px sans-serif`;
  const label = Math.min(220, Math.max(40, ...map.nodes.map((name) => probe.measureText(name).width))) + 8;
  const side = label + n * cell;
  const canvas = el("canvas", { width: side + 4, height: side + 4, "data-names": JSON.stringify(map.nodes), "data-cell": cell, "data-label": label });
  const ctx = canvas.getContext("2d");
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.font = `${font}px sans-serif`;
  ctx.textBaseline = "middle";
  for (let i = 0; i < n; i++) {
    const fault = map.faults[i];
    ctx.fillStyle = fault ? "rgb(200,30,30)" : "#1d2330";
    ctx.font = `${fault ? "bold " : ""}${font}px sans-serif`;
    const name = fit(ctx, map.nodes[i], label - 8);
    ctx.textAlign = "right";
    ctx.fillText(name, label - 4, label + i * cell + cell / 2);
    ctx.save();
    ctx.translate(label + i * cell + cell / 2, label - 4);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "left";
    ctx.fillText(name, 0, 0);
    ctx.restore();
  }
  for (let row = 0; row < n; row++) {
    for (let column = 0; column < n; column++) {
      const [colour, basis] = map.cells[row][column];
      ctx.fillStyle = colour;
      ctx.fillRect(label + column * cell, label + row * cell, cell - (cell > 6 ? 1 : 0), cell - (cell > 6 ? 1 : 0));
      if (basis === "estimated" && cell >= 8) {
        ctx.strokeStyle = "#ffffffaa";
        ctx.beginPath();
        ctx.moveTo(label + column * cell + 1, label + (row + 1) * cell - 2);
        ctx.lineTo(label + (column + 1) * cell - 2, label + row * cell + 1);
        ctx.stroke();
      }
    }
  }
  ctx.strokeStyle = "#1d2330";
  for (let i = 1; i < n; i++) {
    const newZone = answer.zones[i] !== answer.zones[i - 1];
    if (newZone || answer.blocks[i] !== answer.blocks[i - 1]) {
      const at = label + i * cell - 0.5;
      ctx.lineWidth = newZone ? 3 : 1;
      ctx.beginPath();
      ctx.moveTo(at, label); ctx.lineTo(at, side);
      ctx.moveTo(label, at); ctx.lineTo(side, at);
      ctx.stroke();
    }
  }
  const tooltip = document.getElementById("tooltip") || document.body.appendChild(el("div", { id: "tooltip" }));
  canvas.addEventListener("mousemove", (event) => {
    const box = canvas.getBoundingClientRect();
    const column = Math.floor((event.clientX - box.left - label) / cell);
    const row = Math.floor((event.clientY - box.top - label) / cell);
    if (row < 0 || column < 0 || row >= n || column >= n) {
      if (row >= 0 && row < n && column < 0 && map.faults[row]) return showTip(tooltip, event, [map.nodes[row], map.faults[row]]);
      tooltip.style.display = "none";
      return;
    }
    hoverPair(tooltip, event, answer, row, column);
  });
  canvas.addEventListener("mouseleave", () => { tooltip.style.display = "none"; });
  return el("div", { class: "map-frame" }, canvas);
}

function fit(ctx, text, width) {
  if (ctx.measureText(text).width <= width) return text;
  let cut = text;
  while (cut.length > 1 && ctx.measureText(cut + "…").width > width) cut = cut.slice(0, -1);
  return cut + "…";
}

function showTip(tooltip, event, lines) {
  tooltip.replaceChildren(el("div", { class: "title" }, lines[0]), ...lines.slice(1).map((line) => el("div", {}, line)));
  tooltip.style.left = event.clientX + 14 + "px";
  tooltip.style.top = event.clientY + 14 + "px";
  tooltip.style.display = "block";
}

function hoverPair(tooltip, event, answer, row, column) {
  const map = answer.map;
  const [src, dst] = [map.nodes[row], map.nodes[column]];
  const title = `${src} → ${dst}`;
  if (row === column) return showTip(tooltip, event, [src, map.faults[row] || "the node itself"]);
  const key = `${answer.network}|${src}|${dst}`;
  const known = pairCache.get(key);
  if (known && known !== "asking") return showTip(tooltip, event, [title, ...pairLines(known, map.cells[row][column][1])]);
  showTip(tooltip, event, [title, "…"]);
  if (known === "asking") return;
  pairCache.set(key, "asking");
  api("pair", { network: answer.network, src, dst }).then((figures) => {
    pairCache.set(key, figures);
    if (tooltip.style.display === "block" && tooltip.firstChild?.textContent === title) {
      showTip(tooltip, event, [title, ...pairLines(figures, map.cells[row][column][1])]);
    }
  }, (err) => {
    pairCache.delete(key);
    showTip(tooltip, event, [title, "could not read the pair: " + err.message]);
  });
}

function pairLines(answer, basis) {
  const p = answer.pair;
  if (!p) {
    const r = answer.rtt;
    return [`not probed: RTT ${r.rtt_ms === null ? "unknown" : ms(r.rtt_ms)} (${r.basis.replace("_", " ")})`,
      basis === "estimated" ? "the cell shows this estimate" : "no figure of its own"];
  }
  return [
    `RTT median ${ms(p.rtt_median_ms)}, p99 ${ms(p.rtt_p99_ms)}, jitter ${ms(p.jitter_ms)}`,
    `loss ${percent(p.loss_ratio)}${p.one_way_loss_ratio !== null ? `, one way ${percent(p.one_way_loss_ratio)}` : ""}`,
    `goodput ${rate(p.throughput_bps)}${p.throughput_age_s !== null ? ` (tested ${age(p.throughput_age_s)} ago)` : ""}`,
    `quality ${fixed(p.quality, 3)} · by ${p.probe || "-"}${p.filtered.length ? ` (${p.filtered.join(", ")} filtered)` : ""}`,
    `${p.samples} probes · newest window ${age(p.age_s)} old`,
  ];
}

// ---- faults and degraded nodes -------------------------------------------

async function faults() {
  const [answer, topology] = await Promise.all([api("faults"), api("topology")]);
  const degraded = topology.zones.flatMap((z) => z.blocks.flatMap((b) =>
    b.degraded.map((node) => ({ node, zone: z.name, block: b.number }))));
  return el("div", {},
    el("h2", {}, `Faults on ${currentNetwork()}`),
    answer.faults.length === 0 ? el("p", { class: "quiet" }, "No faults found.") : table([
      ["kind", (f) => f.kind],
      ["subject", (f) => f.subject],
      ["what it does", (f) => f.summary, false],
      ["confidence", (f) => fixed(f.confidence, 2), true],
      ["since", (f) => since(f.since_unix_ms), true],
      ["worst links", (f) => f.evidence.length === 0 ? "-" : el("details", {},
        el("summary", {}, `${f.evidence.length} links`),
        f.evidence.map((e) => el("div", {}, `${e.src} → ${e.dst}: ${e.summary}`)))],
    ], answer.faults),
    el("h2", {}, "Degraded nodes"),
    degraded.length === 0 ? el("p", { class: "quiet" }, "None.") : table([
      ["node", (d) => d.node],
      ["zone", (d) => el("a", { href: link("heatmap", { zone: d.zone, block: d.block }) }, d.zone)],
      ["block", (d) => d.block, true],
    ], degraded),
    el("p", { class: "quiet" }, `Last localisation ${answer.observed_unix_ms ? since(answer.observed_unix_ms) : "not run yet"}.`));
}

// ---- the measured blocks ---------------------------------------------------

async function blocks() {
  const topology = await api("topology");
  if (topology.zones.length === 0) return el("p", { class: "quiet" }, "No blocks measured yet (the first round runs after the first windows).");
  return el("div", {},
    topology.zones.map((zone) => el("section", {},
      el("h2", {}, `${zone.name}${zone.region ? ` (${zone.region})` : ""}`),
      el("div", { class: "blocks" }, zone.blocks.map((b) => el("div", { class: "block" },
        el("div", {}, el("a", { href: link("heatmap", { zone: zone.name, block: b.number }) }, `block ${b.number}`),
          ` · ${b.nodes.length} nodes · label ${b.label}`),
        el("div", { class: "nodes" }, b.nodes.map((node, i) => [i ? ", " : "",
          b.degraded.includes(node) ? el("span", { class: "bad", title: "degraded" }, node) : node]))))))),
    el("h2", {}, "Costs between zones"),
    topology.zone_costs.length === 0 ? el("p", { class: "quiet" }, "One zone only.") : table([
      ["from", (c) => c.origin],
      ["to", (c) => c.destination],
      ["RTT p90", (c) => ms(c.rtt_p90_ms), true],
      ["goodput median", (c) => rate(c.goodput_bps), true],
      ["pairs", (c) => c.pairs, true],
    ], topology.zone_costs),
    el("p", { class: "quiet" }, `Worked out ${since(topology.observed_unix_ms)}; publish with netaware publish-topology.`));
}

// ---- where would a job go, and why --------------------------------------

async function job(params, again) {
  if (again) return null; // The reader's form and answer stay as they are.
  const size = params.get("size") || "3";
  const placed = params.get("placed") || "";
  const network = params.get("jobnetwork") || currentNetwork();
  const answerBox = el("div", { class: "answer" });
  const form = el("form", { class: "job", onsubmit: (event) => {
    event.preventDefault();
    const data = new FormData(form);
    go("job", { size: data.get("size"), placed: data.get("placed"), jobnetwork: data.get("jobnetwork") });
  } },
  el("label", {}, "workers", el("input", { name: "size", type: "number", min: 1, max: 100000, value: size, required: true })),
  el("label", {}, "workers already placed (comma list)", el("input", { name: "placed", value: placed, size: 30 })),
  el("label", {}, "network(s)", el("input", { name: "jobnetwork", value: network, size: 16 })),
  el("button", { type: "submit" }, "Where would it go?"));
  if (params.has("size")) {
    const answer = await api("explain", { size, placed, network });
    answerBox.append(explained(answer));
  }
  return el("div", {}, el("h2", {}, "Where would a job go, and why"), form, answerBox);
}

function explained(answer) {
  return el("div", {},
    el("p", {}, `Job of ${answer.size} workers, ${answer.placed.length} placed${answer.placed.length ? ` (${answer.placed.join(", ")})` : ""}, by network ${answer.network}.`),
    answer.neutral ? el("p", { class: "bad" }, "netaware cannot measure here: the extender answers neutrally (placement fails open).") : null,
    el("p", {}, answer.zone ? `Zone ${answer.zone}: ${answer.zone_reason}` : `No zone: ${answer.zone_reason}`),
    el("p", { class: "next-worker" }, "Next worker: ", el("strong", {}, answer.next || "nowhere (no node may take it)")),
    table([
      ["node", (n) => n.name],
      ["zone", (n) => n.zone],
      ["score", (n) => n.feasible ? n.score.toFixed(3) : "-", true],
      ["extender", (n) => n.extender_score, true],
      ["filter", (n) => n.passes_filter ? "passes" : "fails"],
      ["why", (n) => n.why, false],
    ], answer.nodes, (n) => n.name === answer.next ? "next" : (n.feasible ? null : "infeasible")));
}

// ---- start ----------------------------------------------------------------

document.getElementById("network").addEventListener("change", (event) => {
  const { page, params } = route();
  params.set("network", event.target.value);
  location.hash = "#/" + (page === "overview" ? "" : page) + "?" + params.toString();
});
window.addEventListener("hashchange", () => render(false));
setInterval(() => {
  if (document.visibilityState === "visible" && Date.now() - shownAt >= REFRESH_MS) render(true);
}, 1000);
render(false);

// hrag-pg inspector: draws what the server's read endpoints answer (GET /sources, /outline, /nodes/{id},
// POST /inspect).  Nothing here decides anything about retrieval: the marks are the server's (which
// leaves were hit, which passages were taken and why); this file only lays them out.  Text from the
// documents is always set as text, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const MODE_NAMES = { "auto": "budget mode (auto)", "auto-merge": "auto-merge", "parent-child": "parent-child" };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "style") node.style.cssText = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key.startsWith("data")) node.setAttribute(key.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase()), value);
    else node[key] = value;
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }
  return node;
}

// replaceChildren writes null as the text "null": the children a condition left out are dropped first.
const put = (target, ...children) => target.replaceChildren(...children.filter((c) => c !== null && c !== undefined));

const tokens = (n) => `${Number(n).toLocaleString("en")} tok`;

// ------------------------------------------------------------------ talking to the server

async function call(path, body) {
  const init = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new Error(`the server did not answer ${path} (${err.message}); is hrag serve still running?`);
  }
  let data;
  try {
    data = await response.json();
  } catch {
    throw new Error(`${path} answered HTTP ${response.status} with something that is not JSON`);
  }
  if (!response.ok) throw new Error(data.error || `${path} answered HTTP ${response.status}`);
  return data;
}

function showError(err) {
  const box = $("error");
  box.textContent = err.message || String(err);
  box.hidden = false;
}

function clearError() {
  $("error").hidden = true;
  $("error").textContent = "";
}

async function guarded(work) {
  clearError();
  try {
    await work();
  } catch (err) {
    showError(err);
  }
}

// ------------------------------------------------------------------ trees

// Nodes listed in document order with their depth (the outline): nested by a stack of open parents.
function nestByDepth(entries) {
  const roots = [];
  const open = [];
  for (const entry of entries) {
    const item = { node: entry, children: [] };
    while (open.length && open[open.length - 1].node.depth >= entry.depth) open.pop();
    (open.length ? open[open.length - 1].children : roots).push(item);
    open.push(item);
  }
  return roots;
}

// Nodes with their parent's id (an inspection's map): nested under their parents, in the order given.
function nestByParent(nodes) {
  const items = new Map(nodes.map((n) => [n.node_id, { node: n, children: [] }]));
  const roots = [];
  for (const item of items.values()) {
    const parent = item.node.parent_id && items.get(item.node.parent_id);
    (parent ? parent.children : roots).push(item);
  }
  return roots;
}

function renderTree(items, row, openUpTo) {
  return el("ul", {}, items.map((item) => {
    if (!item.children.length) return el("li", {}, row(item.node));
    return el("li", {}, el("details", { open: item.node.depth < openUpTo },
      el("summary", {}, row(item.node)), renderTree(item.children, row, openUpTo)));
  }));
}

// A node by its title, else the start of its text (the map has it; the outline lists titled nodes and
// untitled sections, which it names by their kind).
const nodeLabel = (node) => node.title || node.lead || (node.depth === 0 ? node.source : `(untitled ${node.kind})`);

// A passage by its place: its heading path, and for an untitled one (an item, a paragraph) the start of
// its text as the map shows it.
function passageLabel(result, onMap) {
  const path = (result.heading_path || []).filter(Boolean);
  const node = onMap.get(result.node_id);
  if (!result.title && node && node.lead) path.push(node.lead);
  return path.join(" › ") || result.source;
}

// ------------------------------------------------------------------ browsing

const collections = new Map();

async function loadSources() {
  const sources = await call("/sources");
  collections.clear();
  for (const s of sources) {
    const entry = collections.get(s.collection) || { documents: 0, model: s.model };
    entry.documents += 1;
    collections.set(s.collection, entry);
  }
  const select = $("collection");
  const names = [...collections.keys()];
  // (every collection at once: a question to several models' collections is embedded once per model)
  const all = names.length > 1 ? [el("option", { value: "" }, "(all collections)")] : [];
  select.replaceChildren(...names.map((name) => el("option", { value: name }, name)), ...all);
  if (!collections.size) {
    $("model").textContent = "No documents are stored yet: ingest some with hrag ingest.";
    return;
  }
  await showCollection();
}

async function showCollection() {
  const name = $("collection").value;
  const chosen = name ? [collections.get(name)] : [...collections.values()];
  const documents = chosen.reduce((sum, info) => sum + info.documents, 0);
  const models = [...new Set(chosen.map((info) => info.model
    ? `${info.model.model} (${info.model.dimension} dimensions)` : "model not recorded"))];
  $("model").textContent = `${documents} document${documents === 1 ? "" : "s"} · ${models.join(", ")}`;
  const entries = await call("/outline?max_depth=6" + (name ? `&collection=${encodeURIComponent(name)}` : ""));
  const row = (node) => el("span", { class: "node-row", dataNodeId: node.node_id },
    el("span", { class: "label", onclick: (e) => { e.preventDefault(); openNode(node.node_id); } }, nodeLabel(node)),
    el("span", { class: "tokens" }, tokens(node.token_count)));
  $("outline").replaceChildren(renderTree(nestByDepth(entries), row, 1));
  $("outline").dataset.collection = name;
}

async function openNode(nodeId) {
  await guarded(async () => {
    const node = await call(`/nodes/${encodeURIComponent(nodeId)}`);
    const path = (node.heading_path || []).filter(Boolean).join(" › ");
    put($("node-body"),
      el("h2", {}, node.title || node.kind),
      el("p", { class: "path" }, `${node.source} (${node.collection})`, path ? ` › ${path}` : ""),
      el("p", { class: "tokens" }, `${node.kind} · ${tokens(node.token_count)} · ${node.child_count} children`),
      node.parent_id ? el("button", { type: "button", onclick: () => openNode(node.parent_id) }, "↑ parent") : null,
      el("div", { class: "node-text", dataRole: "node-text" }, node.content),
      node.children.length ? el("h3", {}, "Children") : null,
      el("ol", {}, node.children.map((child) => el("li", {},
        el("span", { class: "node-row" },
          el("span", { class: "label", onclick: () => openNode(child.node_id) }, child.title || child.lead || child.kind),
          el("span", { class: "tokens" }, tokens(child.token_count)))))));
    $("node").hidden = false;
    document.querySelector("main").classList.add("with-node");
  });
}

// ------------------------------------------------------------------ asking

function settingsOf(column) {
  const fieldset = $(`settings-${column}`);
  const mode = fieldset.querySelector("[name=mode]").value;
  const body = { mode };
  for (const input of fieldset.querySelectorAll("input[type=number]")) {
    if (input.closest("label").hidden || input.value === "") continue;
    body[input.name] = input.name === "min_score" || input.name === "merge_threshold"
      ? Number(input.value) : parseInt(input.value, 10);
  }
  return body;
}

function showFieldsOf(fieldset) {
  const mode = fieldset.querySelector("[name=mode]").value;
  for (const label of fieldset.querySelectorAll("label[data-for]")) {
    label.hidden = !label.dataset.for.split(" ").includes(mode);
  }
  fieldset.querySelector("[name=max_tokens]").placeholder = mode === "auto" ? "default" : "none";
}

function hitColor(score, best, worst) {
  const share = best > worst ? (score - worst) / (best - worst) : 1;
  return `background: rgba(var(--hit), ${(0.35 + 0.65 * share).toFixed(2)})`;
}

function mergedText(result, settings) {
  if (!result.merged_from || !result.merged_from.length || result.hit_ratio === null) return null;
  const threshold = settings.merge_threshold;
  const ratio = result.hit_ratio.toFixed(2);
  return threshold === undefined ? `merged · hit ratio ${ratio}`  // (the budget mode merges by evidence, no threshold)
    : `merged · hit ratio ${ratio} ${result.hit_ratio >= threshold ? "≥" : "<"} threshold ${threshold.toFixed(2)}`;
}

function renderAnswer(target, inspection, scale) {
  const { answer, settings, hits } = inspection;
  const results = new Map(answer.results.map((r) => [r.node_id, r]));
  const onMap = new Map(inspection.tree.map((n) => [n.node_id, n]));
  const budget = answer.max_tokens;
  const used = answer.total_tokens;
  const width = Math.min(100, (100 * used) / (budget || scale || 1));
  const best = hits.length ? hits[0].score : 0;
  const worst = hits.length ? hits[hits.length - 1].score : 0;

  const row = (node) => {
    const result = results.get(node.node_id);
    return el("span", { class: "node-row" + (node.in_context ? " in-context" : ""), dataNodeId: node.node_id },
      el("span", { class: "label", onclick: (e) => { e.preventDefault(); openNode(node.node_id); } }, nodeLabel(node)),
      el("span", { class: "tokens" }, tokens(node.token_count)),
      node.hit_rank !== null ? el("span", { class: "badge hit", dataRole: "hit", title: "a leaf the search found",
        style: hitColor(node.hit_score, best, worst) }, `hit #${node.hit_rank} · ${node.hit_score.toFixed(3)}`) : null,
      node.passage_rank !== null ? el("span", { class: "badge passage", dataRole: "passage" },
        `passage #${node.passage_rank}`) : null,
      result && mergedText(result, settings) ? el("span", { class: "badge merged", dataRole: "merged" },
        mergedText(result, settings)) : null);
  };

  const documents = new Map();
  for (const node of inspection.tree) {
    if (!documents.has(node.document_id)) documents.set(node.document_id, []);
    documents.get(node.document_id).push(node);
  }
  const contextText = answer.results.map((r) => r.content).join("\n\n---\n\n");
  const copy = el("button", { type: "button", onclick: async () => {
    const area = target.querySelector("textarea");
    try {
      await navigator.clipboard.writeText(area.value);
    } catch {
      area.select();
      document.execCommand("copy");
    }
    copy.textContent = "Copied";
  } }, "Copy");

  put(target,
    el("h2", {}, MODE_NAMES[answer.mode] || answer.mode),
    el("p", { class: "summary", dataRole: "summary" },
      `${answer.results.length} passage${answer.results.length === 1 ? "" : "s"} · ${used.toLocaleString("en")} tokens`,
      budget ? ` of a ${budget.toLocaleString("en")}-token budget` : " (no budget)",
      ` · ${hits.length} hits`),
    el("div", { class: "bar", dataRole: "budget-bar", title: budget ? `${used} of ${budget} tokens` : `${used} tokens` },
      el("div", { class: "used", style: `width: ${width.toFixed(1)}%` })),
    el("ol", { class: "passages", dataRole: "passages" }, answer.results.map((r, i) => el("li", {},
      el("span", { class: "node-row in-context" },
        el("span", { class: "label", onclick: () => openNode(r.node_id) }, passageLabel(r, onMap)),
        el("span", { class: "tokens" }, tokens(r.token_count))),
      " ", el("span", { class: "why" }, inspection.reasons[i]),
      mergedText(r, settings) && settings.merge_threshold !== undefined
        ? el("span", { class: "why" }, ` (threshold ${settings.merge_threshold})`) : null))),
    answer.dropped.length ? el("p", { class: "dropped" }, "Left out (over the budget): ",
      answer.dropped.map((r) => `${passageLabel(r, onMap)} (${tokens(r.token_count)})`)
        .join("; ")) : null,
    el("h3", {}, "Where it comes from"),
    el("div", { class: "tree", dataRole: "map" }, [...documents.values()].map((nodes) =>
      el("div", {}, el("p", { class: "path" }, `${nodes[0].source} (${nodes[0].collection})`),
        renderTree(nestByParent(nodes), row, 99)))),
    el("h3", {}, "The context an LLM receives ", copy),
    el("textarea", { class: "context-text", readOnly: true, dataRole: "context", value: contextText }));
}

async function ask(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question) return;
  const columns = $("compare").checked ? ["a", "b"] : ["a"];
  $("answer-b").hidden = columns.length === 1;
  $("answers").classList.toggle("side-by-side", columns.length === 2);
  $("ask-button").disabled = true;
  for (const column of columns) $(`answer-${column}`).replaceChildren(el("p", { class: "muted" }, "Asking…"));
  try {
    await guarded(async () => {
      const inspections = await Promise.all(columns.map((column) =>
        call("/inspect", { question, collection: $("collection").value || null, ...settingsOf(column) })));
      const scale = Math.max(...inspections.map((i) => i.answer.total_tokens));
      inspections.forEach((inspection, i) => renderAnswer($(`answer-${columns[i]}`), inspection, scale));
    });
  } finally {
    $("ask-button").disabled = false;
    for (const column of columns) {
      const target = $(`answer-${column}`);
      if (target.textContent === "Asking…") target.replaceChildren();
    }
  }
}

// ------------------------------------------------------------------ start

function setUp() {
  const template = $("mode-settings");
  for (const [column, mode] of [["a", "auto"], ["b", "auto-merge"]]) {
    const fieldset = $(`settings-${column}`);
    fieldset.append(template.content.cloneNode(true));
    const select = fieldset.querySelector("[name=mode]");
    select.value = mode;
    select.addEventListener("change", () => showFieldsOf(fieldset));
    showFieldsOf(fieldset);
  }
  if (new URLSearchParams(location.search).has("compare")) $("compare").checked = true;
  $("settings-b").classList.toggle("off", !$("compare").checked);
  $("compare").addEventListener("change", () => $("settings-b").classList.toggle("off", !$("compare").checked));
  $("question-form").addEventListener("submit", ask);
  $("collection").addEventListener("change", () => guarded(showCollection));
  $("close-node").addEventListener("click", () => {
    $("node").hidden = true;
    document.querySelector("main").classList.remove("with-node");
  });
  guarded(async () => {
    const health = await call("/health");
    $("health").textContent = `hrag-pg ${health.version} · schema ${health.schema_revision}`
      + (health.status === "ok" ? "" : ` (${health.status})`);
  });
  guarded(loadSources);
}

setUp();

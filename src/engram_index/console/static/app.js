// The engram-index page: sign in, pick a collection, search, and see why each result matched.
// No build step and no innerHTML: every text from the service goes into the page as text nodes.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { key: sessionStorage.getItem("engram-key") || "", collections: [] };

// Split `text` into plain and highlighted parts from UTF-8 byte ranges (the engine's offsets):
// JavaScript strings index UTF-16 code units, so the ranges are applied to the encoded bytes
// and each part decoded back, never to the string's own indexes.
function highlightParts(text, highlights) {
  const bytes = new TextEncoder().encode(text);
  const decoder = new TextDecoder();
  const parts = [];
  let at = 0;
  const ranges = [...(highlights || [])].sort((a, b) => a.byteStart - b.byteStart);
  for (const h of ranges) {
    const start = Math.max(at, Math.min(h.byteStart, bytes.length));
    const end = Math.max(start, Math.min(h.byteEnd, bytes.length));
    if (start > at) parts.push({ text: decoder.decode(bytes.subarray(at, start)), mark: false });
    if (end > start) parts.push({ text: decoder.decode(bytes.subarray(start, end)), mark: true });
    at = end;
  }
  if (at < bytes.length) parts.push({ text: decoder.decode(bytes.subarray(at)), mark: false });
  return parts;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

// A key is a bearer key (sm_…, kg_…), or a garden.engram space credential: the JSON object of its
// signed headers (what `engram-index dev-credential --json` prints), sent as they are.
function credentialHeaders(key) {
  if (!key) return {};
  if (key.startsWith("{")) {
    let parsed;
    try { parsed = JSON.parse(key); } catch (e) { throw new Error("the space credential is not a JSON object of headers"); }
    const out = {};
    for (const [k, v] of Object.entries(parsed)) out[k.toLowerCase()] = String(v);
    return out;
  }
  return { authorization: "Bearer " + key };
}

async function api(method, path, body) {
  const headers = { accept: "application/json", ...credentialHeaders(state.key) };
  if (body !== undefined) headers["content-type"] = "application/json";
  const answer = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  try { data = await answer.json(); } catch (e) { data = null; }
  if (!answer.ok) throw new Error((data && data.message) || ("HTTP " + answer.status));
  return data;
}

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

async function signIn(key) {
  state.key = key;
  showError("");
  try {
    const data = await api("GET", "/console/api/collections");
    if (!data.collections.length) throw new Error("This credential can read no collection.");
    state.collections = data.collections;
    sessionStorage.setItem("engram-key", key);
    const select = $("collection");
    select.replaceChildren(...data.collections.map((c) => el("option", { value: c.id }, c.name + " — " + c.face)));
    $("who").textContent = !key ? "open service (no key)" :
      key.startsWith("{") ? "signed in (space credential)" : "signed in (" + data.face + " key)";
    $("signin").hidden = true;
    $("signout").hidden = false;
    $("workspace").hidden = false;
    $("query").focus();
  } catch (e) {
    state.key = "";
    sessionStorage.removeItem("engram-key");
    showError("Sign-in refused: " + e.message);
    $("key").focus();
  }
}

function fmt(n, digits) {
  return n === null || n === undefined ? "—" : Number(n).toFixed(digits);
}

function fusionText(f) {
  if (!f) return "—";
  if (f.method === "rrf") {
    const ranks = Object.entries(f.ranks || {}).map(([leg, r]) => leg + " #" + r).join(", ");
    return "reciprocal rank (k = " + (f.k || 60) + ")" + (ranks ? ": " + ranks : "");
  }
  if (f.method === "convex") return "convex: z-scores of both, weighted";
  return String(f.method || JSON.stringify(f));
}

function explanationNode(why) {
  const terms = (why.terms || []).map((t) => t.term + (t.field && t.field !== "text" ? " (" + t.field + ")" : ""));
  const rows = [
    ["Matched terms", terms.length ? terms.join(", ") : "none (found by meaning)"],
    ["BM25", fmt(why.bm25, 3) + (why.keywordRank ? "  (keyword #" + why.keywordRank + ")" : "")],
    ["Vector similarity", fmt(why.vectorSimilarity, 3) + (why.vectorRank ? "  (vector #" + why.vectorRank + ")" : "")],
    ["Fusion", fusionText(why.fusion)],
  ];
  const dl = el("dl", { class: "explanation" });
  for (const [k, v] of rows) dl.append(el("dt", {}, k), el("dd", {}, v));
  return el("details", { class: "why" }, el("summary", {}, "Why it matched"), dl);
}

function snippetNode(result) {
  const snip = result.explanation && result.explanation.snippet;
  const node = el("p", { class: "snippet" });
  const parts = snip ? highlightParts(snip.text, snip.highlights) : [{ text: result.text, mark: false }];
  for (const p of parts) node.append(p.mark ? el("mark", {}, p.text) : document.createTextNode(p.text));
  return node;
}

function resultNode(result, index) {
  const score = result.score === null ? null : el("span", { class: "score" }, "score " + fmt(result.score, 3));
  const tags = (result.tags || []).map((t) => el("span", { class: "tag" }, "#" + t));
  const when = result.createdAt ? new Date(result.createdAt).toLocaleString() : "";
  const item = el("li", { tabindex: "0", "data-id": result.id, "aria-label": "Result " + (index + 1) },
    snippetNode(result),
    el("div", { class: "meta" },
      score,
      result.author ? el("span", {}, result.author) : null,
      when ? el("time", { datetime: result.createdAt }, when) : null,
      ...tags),
    result.explanation ? explanationNode(result.explanation) : null);
  item.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && e.target === item) openDetail(result.id);
  });
  item.addEventListener("dblclick", () => openDetail(result.id));
  return item;
}

function filters() {
  const tags = $("tags").value.split(",").map((t) => t.trim()).filter(Boolean);
  const metadata = {};
  for (const pair of $("metadata").value.split(",")) {
    const [k, ...v] = pair.split("=");
    if (k.trim()) metadata[k.trim()] = v.join("=").trim();
  }
  const since = $("since").value ? $("since").value + "T00:00:00Z" : null;
  return { author: $("author").value.trim() || null, tags, since, metadata };
}

async function search() {
  showError("");
  const body = { collection: $("collection").value, query: $("query").value, mode: $("mode").value || null,
                 limit: Number($("limit").value || 10), ...filters() };
  $("summary").textContent = "Searching…";
  try {
    const data = await api("POST", "/console/api/recall", body);
    $("results").replaceChildren(...data.results.map(resultNode));
    $("more").hidden = true;
    $("summary").textContent = data.results.length + " result" + (data.results.length === 1 ? "" : "s") +
      " in " + data.collection + (data.mode ? " (" + data.mode + ")" : "");
    $("note").textContent = data.note || "";
    $("note").hidden = !data.note;
    const fewer = data.whyFewer && data.whyFewer.message;
    $("whyfewer").textContent = fewer || "";
    $("whyfewer").hidden = !fewer;
  } catch (e) {
    $("summary").textContent = "";
    $("results").replaceChildren();
    showError(e.message);
  }
}

// Browse a collection newest first, a page at a time (the list call's cursor).
async function browse(cursor) {
  showError("");
  const params = new URLSearchParams({ collection: $("collection").value, limit: $("limit").value || "10" });
  if (cursor) params.set("cursor", cursor);
  try {
    const data = await api("GET", "/console/api/list?" + params);
    const start = cursor ? $("results").children.length : 0;
    const items = data.memories.map((m, i) => resultNode({ ...m, score: null, explanation: null }, start + i));
    if (cursor) $("results").append(...items); else $("results").replaceChildren(...items);
    $("summary").textContent = $("results").children.length + " newest in " + $("collection").value;
    for (const id of ["note", "whyfewer"]) $(id).hidden = true;
    $("more").hidden = !data.cursor;
    $("more").dataset.cursor = data.cursor || "";
  } catch (e) {
    showError(e.message);
  }
}

async function openDetail(id) {
  try {
    const data = await api("GET", "/console/api/memory?collection=" + encodeURIComponent($("collection").value) +
                                  "&id=" + encodeURIComponent(id));
    const m = data.memory;
    $("detail-id").textContent = m.id;
    $("detail-text").textContent = m.text;
    $("detail-versions").replaceChildren(...(m.versions || []).map((v) =>
      el("li", {}, el("strong", {}, "version " + (v.version ?? "?")), " ",
         v.createdAt ? el("time", { datetime: v.createdAt }, new Date(v.createdAt).toLocaleString()) : "",
         el("div", {}, v.text || ""))));
    $("detail").showModal();
    $("detail-close").focus();
  } catch (e) {
    showError(e.message);
  }
}

function moveFocus(step) {
  const items = [...$("results").children];
  const at = items.indexOf(document.activeElement);
  const next = items[Math.max(0, Math.min(items.length - 1, at + step))];
  if (next) next.focus();
}

document.addEventListener("DOMContentLoaded", () => {
  $("signin").addEventListener("submit", (e) => { e.preventDefault(); signIn($("key").value.trim()); });
  $("search").addEventListener("submit", (e) => { e.preventDefault(); search(); });
  $("signout").addEventListener("click", () => { sessionStorage.removeItem("engram-key"); location.reload(); });
  $("detail-close").addEventListener("click", () => $("detail").close());
  $("browse").addEventListener("click", () => browse(null));
  $("more").addEventListener("click", () => browse($("more").dataset.cursor));
  document.addEventListener("keydown", (e) => {
    const typing = ["INPUT", "SELECT", "TEXTAREA"].includes(document.activeElement.tagName);
    if (e.key === "/" && !typing && !$("workspace").hidden) { e.preventDefault(); $("query").focus(); }
    else if ((e.key === "ArrowDown" || e.key === "j") && !typing) { e.preventDefault(); moveFocus(1); }
    else if ((e.key === "ArrowUp" || e.key === "k") && !typing) { e.preventDefault(); moveFocus(-1); }
  });
  if (state.key) signIn(state.key); else $("key").focus();
});

// The demo page: plain JS, no dependencies, talks only to this origin.
"use strict";
const $ = (id) => document.getElementById(id);
let history = [];
let lastSources = [];

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("apikey").value.trim();
  if (key) h["X-API-Key"] = key;
  return h;
}

async function checkReady() {
  try {
    const r = await fetch("/ready", { headers: headers() });
    const body = await r.json();
    $("status").textContent = r.ok
      ? `ready: ${body.papers} papers, ${body.chunks} chunks`
      : `not ready (${body.cause || body.detail})`;
    if (!r.ok) setTimeout(checkReady, 1000);
  } catch (e) {
    $("status").textContent = "service unreachable";
  }
}

function showPassage(n) {
  const s = lastSources.find((x) => x.n === n);
  if (!s) return;
  document.querySelectorAll("a.cite").forEach((a) => a.classList.toggle("active", Number(a.dataset.n) === n));
  $("passage-title").textContent = `[${s.n}] ${s.title || "(untitled)"}`;
  $("passage-where").textContent = `arXiv:${s.arxiv_id} · page ${s.page}` + (s.section ? ` · section: ${s.section}` : "");
  $("passage-text").textContent = s.quote;
  $("passage").hidden = false;
}

function citeLink(n) {
  const a = document.createElement("a");
  a.className = "cite";
  a.href = "#";
  a.dataset.n = String(n);
  a.textContent = `[${n}]`;
  a.addEventListener("click", (ev) => { ev.preventDefault(); showPassage(n); });
  return a;
}

function renderAnswer(text) {
  const el = $("answer");
  el.textContent = "";
  const re = /\[(\d+)\]/g;
  let last = 0, m;
  while ((m = re.exec(text)) !== null) {
    el.appendChild(document.createTextNode(text.slice(last, m.index)));
    el.appendChild(citeLink(Number(m[1])));
    last = re.lastIndex;
  }
  el.appendChild(document.createTextNode(text.slice(last)));
}

function render(body) {
  lastSources = body.citations || [];
  $("result").hidden = false;
  $("passage").hidden = true;
  renderAnswer(body.answer || "");
  const rw = $("rewritten");
  if (body.rephrased_query !== undefined) {
    rw.hidden = false;
    rw.textContent = `Retrieved with: “${body.rephrased_query}” (${body.rewritten ? "rewritten by " + body.rewriter : "not rewritten: " + body.rewrite_reason})`;
  } else {
    rw.hidden = true;
  }
  const list = $("sources");
  list.textContent = "";
  for (const s of lastSources) {
    const li = document.createElement("li");
    li.value = s.n;
    if (s.cited) li.className = "cited";
    li.appendChild(citeLink(s.n));
    li.appendChild(document.createTextNode(` ${s.title || "(untitled)"} `));
    const where = document.createElement("span");
    where.className = "where";
    where.textContent = `arXiv:${s.arxiv_id}, p. ${s.page}` + (s.section ? `, ${s.section}` : "");
    li.appendChild(where);
    list.appendChild(li);
  }
  const v = $("verdicts");
  v.textContent = "";
  const j = body.judgement;
  v.hidden = !j;
  if (j) {
    if (!j.claims || j.claims.length === 0) {
      const li = document.createElement("li");
      li.textContent = `judge: ${j.status}`;
      v.appendChild(li);
    }
    for (const c of j.claims || []) {
      const li = document.createElement("li");
      li.className = c.label;
      li.textContent = `${c.label}: ${c.claim}`;
      li.title = c.reason;
      v.appendChild(li);
    }
  }
  const t = body.latency_ms || {};
  $("timing").textContent = `${body.retriever} → ${body.answerer}; ` +
    Object.entries(t).map(([k, ms]) => `${k} ${ms.toFixed(1)} ms`).join(", ");
}

function renderHistory() {
  const h = $("history");
  h.textContent = "";
  for (const m of history.slice(0, -1)) {
    const p = document.createElement("p");
    p.className = "turn";
    const b = document.createElement("b");
    b.textContent = m.role === "user" ? "You: " : "Lab: ";
    p.appendChild(b);
    p.appendChild(document.createTextNode(m.content));
    h.appendChild(p);
  }
}

async function ask(ev) {
  ev.preventDefault();
  const question = $("question").value.trim();
  if (!question) return;
  $("error").hidden = true;
  $("ask").disabled = true;
  const opts = {
    k: Number($("k").value) || 5,
    retriever: $("retriever").value,
    answerer: $("answerer").value,
    judge: $("judge").checked,
  };
  const chat = $("chat").checked;
  let url = "/ask", payload = { question, ...opts };
  if (chat) {
    history.push({ role: "user", content: question });
    url = "/chat";
    payload = { messages: history, ...opts };
  }
  try {
    const r = await fetch(url, { method: "POST", headers: headers(), body: JSON.stringify(payload) });
    const body = await r.json();
    if (!r.ok) throw new Error(`${body.error}: ${body.detail}`);
    render(body);
    if (chat) {
      history.push({ role: "assistant", content: body.answer });
      renderHistory();
      $("question").value = "";
    }
  } catch (e) {
    if (chat) history.pop();
    $("error").textContent = String(e.message || e);
    $("error").hidden = false;
  } finally {
    $("ask").disabled = false;
  }
}

$("ask-form").addEventListener("submit", ask);
$("reset").addEventListener("click", () => { history = []; renderHistory(); $("result").hidden = true; });
checkReady();

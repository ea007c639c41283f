// Latch web UI. Every piece of session text is put in the page with textContent, never as markup.
"use strict";
(function () {
  const token = new URLSearchParams(location.search).get("token");
  const $ = (id) => document.getElementById(id);
  const state = { lastSeq: 0, connects: 0, received: [] };
  window.__latch = state;

  function url(path, extra) {
    const u = new URL(path, location.origin);
    if (token) u.searchParams.set("token", token);
    for (const [k, v] of Object.entries(extra || {})) u.searchParams.set(k, String(v));
    return u.toString();
  }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  async function getJSON(path) {
    const r = await fetch(url(path));
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  }
  function fail(err) { const p = $("error"); p.hidden = false; p.textContent = String(err.message || err); }

  // the sessions list, as `latch sessions` shows it: newest first, children under their parent
  async function sessionsView() {
    $("sessions-view").hidden = false;
    const body = $("sessions").tBodies[0];
    for (const s of (await getJSON("/api/sessions")).sessions) {
      const tr = el("tr"); tr.dataset.session = s.id; tr.dataset.depth = String(s.depth);
      const td = el("td", "id");
      if (s.depth) td.append(el("span", "tree", "\u00a0\u00a0".repeat(s.depth - 1) + "\u2514 "));
      const a = el("a", null, s.short); a.title = s.id;
      a.href = url("/s/" + encodeURIComponent(s.id)); td.append(a); tr.append(td);
      for (const v of [s.started_text, s.harness || "?", s.model || "no model", n(s.requests), s.cost_text, s.status])
        tr.append(el("td", null, v));
      tr.append(el("td", "title", s.title || "(no title)"));
      body.append(tr);
    }
  }

  // each tool call is one line, its command or path then its result in one line (filled when the result
  // arrives); a tool result shows that line, and its whole text under "whole result" when it has several lines
  const calls = new Map(), results = new Map();
  function setResult(callId) {
    const line = calls.get(callId), r = results.get(callId);
    if (!line || !r) return;
    const span = line.querySelector(".result");
    span.textContent = " \u21d2 " + r.line; span.classList.toggle("error", !!r.is_error);
  }
  function renderItem(item) {
    const div = el("div", "item role-" + item.role + (item.is_error ? " is-error" : ""));
    div.dataset.seq = String(item.seq);
    let meta = item.role + " #" + item.seq;
    if (item.name) meta += " " + item.name;
    if (item.subtype) meta += " (" + item.subtype + ")";
    if (item.model) meta += " " + item.model;
    div.append(el("div", "meta", meta));
    if (item.role === "tool" && item.text && item.text.trim().includes("\n")) {
      div.append(el("div", "line", item.line));
      const more = el("details"); more.append(el("summary", null, "whole result"), el("pre", "text", item.text));
      div.append(more);
    } else if (item.text) div.append(el("pre", "text", item.text));
    for (const c of item.tool_calls || []) {
      const line = el("div", "call"); line.dataset.callId = c.id;
      line.append(el("span", "name", "\u2192 " + c.summary), el("span", "result", " \u21d2 \u2026"));
      calls.set(c.id, line); div.append(line); setResult(c.id);
    }
    if (item.role === "tool") { results.set(item.call_id, item); setResult(item.call_id); }
    if (item.reasoning_reported) div.append(el("span", "badge reasoning", "reasoning reported"));
    $("transcript").append(div);
  }
  function fill(dl, obj) {
    dl.replaceChildren();
    for (const [k, v] of Object.entries(obj)) {
      if (v !== null && typeof v === "object") continue;
      dl.append(el("dt", null, k.replace(/_/g, " ")), el("dd", null, v === null ? "unknown" : typeof v === "number" ? n(v) : v));
    }
  }
  // the canonical state as `latch state` prints it: its head and counts, then one section per heading of the
  // rendered state; the evidence and verdict as `latch evidence` gives them
  function renderCanonical(c) {
    const box = $("state");
    box.replaceChildren(el("p", "state-head", c.lines[0]), el("p", "state-counts", c.lines[1]));
    let list = null;
    for (const line of c.lines.slice(2)) {
      if (line.startsWith("- ") || line.startsWith("  ")) {
        if (!list) { list = el("ul"); box.append(list); }
        list.append(el("li", null, line.replace(/^- /, "")));
      } else if (line.endsWith(":") || line === "Canonical state") {
        list = null; box.append(el("h3", null, line.replace(/:$/, "")));
      } else { list = null; box.append(el("p", null, line)); }
    }
    const ev = c.evidence, eb = $("evidence");
    eb.replaceChildren(el("p", "meta", "workspace generation " + n(ev.generation)));
    if (!ev.requirements.length) eb.append(el("p", "none", "(no validation recorded)"));
    else {
      const t = el("table", "evidence"); const head = el("tr");
      for (const h of ["requirement", "status", "generation", "state", "set"]) head.append(el("th", null, h));
      t.append(head);
      for (const r of ev.requirements) {
        const tr = el("tr", r.current ? "current" : "stale");
        for (const v of [r.requirement, r.status, n(r.generation), r.current ? "current" : "STALE", r.set]) tr.append(el("td", null, v));
        t.append(tr);
      }
      eb.append(t);
    }
    for (const s of ev.sets) eb.append(el("p", "set", "set " + s.seq + " proved by: " + s.command));
    for (const p of ev.running) eb.append(el("p", "set", "managed process " + p.process_id + " running since seq " + p.started_seq + ": " + p.command));
    const verdict = el("p", "verdict " + (ev.certified ? "certified" : "not-certified"), ev.verdict);
    eb.append(verdict);
    if (ev.reasons.length) { const ul = el("ul"); for (const r of ev.reasons) ul.append(el("li", null, r)); eb.append(ul); }
  }
  // commands: POST with a JSON body and the X-Latch-Token header; the receipt's status follows the durable
  // events (status.commands), so a reload shows the same receipts
  const receipts = new Map();
  function renderReceipt(r) {
    let li = receipts.get(r.id);
    if (!li) { li = el("li", "receipt"); li.dataset.id = r.id; receipts.set(r.id, li); $("receipts").append(li); }
    li.dataset.command = r.command; li.dataset.status = r.status;
    li.textContent = r.command + " " + r.status + (r.text ? ": " + r.text : "");
  }
  async function postCommand(sid, body) {
    const r = await fetch(url("/api/sessions/" + encodeURIComponent(sid) + "/commands"), {
      method: "POST", headers: { "Content-Type": "application/json", "X-Latch-Token": token || "-" },
      body: JSON.stringify(body), credentials: "same-origin" });
    const got = await r.json();
    if (!r.ok) throw new Error(got.error || r.statusText);
    renderReceipt(Object.assign({ text: body.text }, got.receipt));
    return got.receipt;
  }
  function wireCommands(sid) {
    const send = (body) => postCommand(sid, body).catch(fail);
    $("commands").addEventListener("submit", (e) => {
      e.preventDefault();
      const text = $("steer-text").value;
      if (!text.trim()) return;
      send({ command: "steer", text: text }).then(() => { $("steer-text").value = ""; });
    });
    $("compact").addEventListener("click", () => send({ command: "compact" }));
    $("stop").addEventListener("click", () => send({ command: "stop" }));
  }
  function renderRun(st) {
    const run = st.run || {}, box = $("run");
    const phase = run.phase || "none";
    let label = { none: "no latch run recorded", running: "running", interrupted: "interrupted" }[phase];
    if (phase === "ended") label = "ended: " + run.run.outcome;
    const b = el("span", "badge run " + phase, label);
    b.dataset.phase = phase; box.replaceChildren(b);
    if (run.run) box.append(el("div", "meta", "pid " + run.run.pid + " on " + run.run.host + " since " + run.run.started_at));
    $("stop").disabled = phase !== "running";
    $("commands").hidden = phase === "none";  // no latch run ever drove this session (an import)
    for (const c of st.commands || []) renderReceipt(c);
  }
  // the group sidebar: members, then each task with its status and owner (its claim)
  function renderGroup(g) {
    $("group-box").hidden = !g;
    const box = $("group");
    box.replaceChildren();
    if (!g) return;
    box.append(el("div", "meta", "root " + g.root + " \u00b7 messages " + g.messages.delivered + "/" + g.messages.queued + " delivered"));
    const members = el("ul", "members");
    for (const m of g.members) {
      const li = el("li", "member", m.agent + (m.session ? " \u00b7 " + m.session : " \u00b7 not running"));
      li.dataset.agent = m.agent; members.append(li);
    }
    const tasks = el("ul", "tasks");
    for (const t of g.tasks) {
      let text = t.id + ": " + t.title + " \u00b7 " + t.status;
      if (t.owner) text += " \u00b7 claimed by " + t.owner;
      if (t.depends_on.length) text += " \u00b7 after " + t.depends_on.join(", ");
      const li = el("li", "task " + t.status, text);
      li.dataset.task = t.id; li.dataset.status = t.status; li.dataset.owner = t.owner || "";
      tasks.append(li);
    }
    box.append(members, tasks);
  }
  function renderStatus(st) {
    renderRun(st);
    renderGroup(st.group || null);
    const box = $("activity");
    box.replaceChildren(el("span", "badge " + (st.live ? "live" : "idle"), st.live ? "live" : "not live"));
    if (st.activity.reasoning_reported) box.append(el("span", "badge reasoning", "reasoning reported"));
    for (const t of st.activity.tools) {
      const b = el("span", "badge tool " + t.status, t.name + " " + t.status);
      b.dataset.callId = t.call_id; box.append(b);
    }
    renderCanonical(st.canonical);
    fill($("usage"), st.usage);
    renderRequests(st);
  }
  function usd(v) { return v === null || v === undefined ? "unpriced" : "$" + v.toFixed(4); }
  function n(v) { return v === null || v === undefined ? "?" : v.toLocaleString("en-US"); }
  // per-request context bars (cache read / cache write / uncached, scaled to the largest request), the
  // cache state of each request with its reason, its cost; above them the provider cache epochs
  function renderRequests(st) {
    const ctx = st.context || [], cache = (st.cache || {}).requests || [], costs = (st.costs || {}).requests || [];
    const top = Math.max(1, ...ctx.map((r) => r.prompt_tokens || 0));
    const box = $("requests");
    box.replaceChildren();
    ctx.forEach((r, i) => {
      const c = cache[i] || {}, cost = costs[i] || {};
      const row = el("div", "req " + (c.cache || ""));
      row.dataset.request = String(r.request); row.dataset.seq = String(r.seq);
      row.append(el("span", "label", "#" + r.request));
      const bar = el("span", "bar");
      for (const [cls, v] of [["read", r.cache_read_tokens], ["write", r.cache_write_tokens], ["uncached", r.uncached_tokens]]) {
        const seg = el("span", "seg " + cls); seg.style.width = (100 * (v || 0) / top) + "%";
        seg.title = cls + " " + n(v) + " tokens"; bar.append(seg);
      }
      row.append(bar);
      let info = n(r.prompt_tokens) + " tokens \u00b7 " + usd(cost.usd) + " \u00b7 epoch " + c.epoch + " " + c.cache;
      if (c.reason) info += " (" + c.reason + ")";
      row.append(el("span", "info", info));
      box.append(row);
    });
    const epochs = $("epochs");
    epochs.replaceChildren();
    const total = Math.max(1, ctx.length);
    for (const e of (st.cache || {}).epochs || []) {
      const span = el("span", "epoch", "epoch " + e.epoch + ": requests " + e.first_request + "\u2013" + e.last_request);
      span.dataset.epoch = String(e.epoch); span.style.flexGrow = String(e.requests / total);
      epochs.append(span);
    }
    for (const b of (st.cache || {}).breaks || []) {
      const span = el("span", "cache-break", "cache break at request " + b.request + ": " + b.reason);
      span.dataset.request = String(b.request); epochs.append(span);
    }
    const t = (st.costs || {}).totals;
    if (t) epochs.append(el("span", "cost", "cost " + usd(t.usd) + " (" + t.priced_requests + " of " + t.requests + " priced)"));
  }

  // the replay page: one row per model request (latch replay --json), a click shows its view content
  function changed(c) {
    if (!c) return "refused (overflow)";
    const parts = [c.cache === "kept" ? "cache kept" : "cache " + c.cache + (c.rotation_reason ? " (" + c.rotation_reason + ")" : "")];
    if (c.prefix_break) parts.push("prefix break: " + c.prefix_break);
    const cnt = (k, what) => { const v = c[k]; if (v && v.length) parts.push(what + " " + v.length); };
    cnt("units_appended", "+units"); cnt("units_evicted", "\u2212units"); cnt("recall_added", "+recall");
    cnt("recall_dropped", "\u2212recall"); cnt("kernel_added", "+kernel");
    if (c.tokens_delta !== undefined && c.tokens_delta !== null) parts.push((c.tokens_delta >= 0 ? "+" : "") + n(c.tokens_delta) + " tokens");
    return parts.join(" \u00b7 ");
  }
  function renderView(v) {
    $("replay-request").hidden = false;
    $("replay-request").dataset.request = String(v.request);
    $("replay-request-title").textContent = "request " + v.request + " of " + v.total_requests + " \u00b7 seq " + v.seq;
    const box = $("replay-messages"); box.replaceChildren();
    $("replay-tools").replaceChildren();
    if (v.status === "overflow") {
      $("replay-request-head").textContent = "refused by the engine: " + v.error;
      $("replay-system-title").textContent = ""; $("replay-system").textContent = ""; $("replay-tools-title").textContent = "";
      $("replay-request").scrollIntoView({ block: "start" });
      return;
    }
    const t = v.tokens;
    $("replay-request-head").textContent = "engine " + v.engine + " \u00b7 estimator " + v.estimator + " \u00b7 epoch " + v.epoch +
      " (" + v.status + ") \u00b7 " + n(t.total_tokens) + " of " + n(v.hard_limit_tokens) + " tokens \u00b7 " + v.messages.length + " messages";
    $("replay-system-title").textContent = "system \u00b7 " + n(v.system.tokens) + " tokens";
    $("replay-system").textContent = v.system.text || "(empty: no system prompt in this request)";
    $("replay-tools-title").textContent = "tools \u00b7 " + v.tools.items.length + " \u00b7 " + n(v.tools.tokens) + " tokens";
    for (const tool of v.tools.items) $("replay-tools").append(el("li", null, tool.name + (tool.description ? ": " + tool.description : "")));
    for (const m of v.messages) {
      const div = el("div", "msg " + m.role); div.dataset.index = String(m.index);
      let title = "[" + m.index + "] " + m.role + " \u00b7 " + m.kind;
      if (m.role === "tool") title += " \u00b7 result for " + m.tool_call_id + (m.is_error ? " (error)" : "");
      if (m.seq !== null) title += " \u00b7 seq " + m.seq;
      title += " \u00b7 " + n(m.tokens) + " tokens";
      div.append(el("h3", null, title));
      if (m.content.trim() || !(m.tool_calls.length || m.media.length)) div.append(el("pre", "content", m.content || "(empty)"));
      for (const c of m.tool_calls) div.append(el("pre", "call", "\u2192 call " + c.id + " " + c.name + " " + c.arguments));
      for (const r of m.media) div.append(el("p", "media", "[" + r.media_type + ", " + n(r.byte_size) + " bytes, sha256 " + r.sha256.slice(0, 16) + "]"));
      box.append(div);
    }
    $("replay-request").scrollIntoView({ block: "start" });
  }
  async function replayView(sid) {
    $("replay-view").hidden = false;
    $("title").textContent = sid;
    $("replay-back").href = url("/s/" + encodeURIComponent(sid));
    const doc = await getJSON("/api/sessions/" + encodeURIComponent(sid) + "/replay");
    const cost = doc.summary.cost || {};
    // like for like: Latch's views against the transcript's cost of the same requests; refused requests counted
    const refused = cost.refused_requests || 0;
    $("replay-summary").textContent = doc.requests.length + " requests \u00b7 engine " + doc.engine + " \u00b7 estimator " +
      doc.estimator + " \u00b7 " + doc.summary.epochs + " epoch(s) \u00b7 " + refused + " refused \u00b7 cost on the " +
      cost.compared_requests + " requests with a view: " + usd(cost.view_usd) + " Latch's views vs " +
      usd(cost.original_compared_usd) + " as the transcript ran them (all " + doc.requests.length + ": " + usd(cost.original_usd) + ")";
    const body = $("replay-table").tBodies[0];
    for (const r of doc.requests) {
      const tr = el("tr", "replay-row"); tr.dataset.request = String(r.request); tr.tabIndex = 0;
      const c = r.cost || {};
      for (const v of ["#" + r.request, n(r.total_tokens), r.epoch === undefined ? "\u2013" : r.epoch, changed(r.changes),
                       usd(c.view_usd) + " / " + usd(c.original_usd)]) tr.append(el("td", null, v));
      const show = () => {
        for (const x of body.querySelectorAll("tr.selected")) x.classList.remove("selected");
        tr.classList.add("selected");
        getJSON("/api/sessions/" + encodeURIComponent(sid) + "/replay/" + r.request).then(renderView).catch(fail);
      };
      tr.addEventListener("click", show);
      tr.addEventListener("keydown", (e) => { if (e.key === "Enter") show(); });
      body.append(tr);
    }
    document.body.dataset.replay = "ready";
  }

  async function sessionView(sid) {
    $("session-view").hidden = false;
    $("title").textContent = sid;
    $("replay-link").href = url("/s/" + encodeURIComponent(sid) + "/replay");
    wireCommands(sid);
    const snap = await getJSON("/api/sessions/" + encodeURIComponent(sid));
    snap.transcript.forEach(renderItem);
    const ses = snap.session;
    renderStatus(Object.assign({}, snap, { run: ses.run, commands: ses.commands, group: ses.group }));
    state.lastSeq = snap.last_seq;
    const es = new EventSource(url("/api/sessions/" + encodeURIComponent(sid) + "/events", { after: snap.last_seq }));
    es.onopen = () => { state.connects += 1; $("conn").textContent = "connected"; document.body.dataset.connects = String(state.connects); };
    es.onerror = () => { $("conn").textContent = "reconnecting"; };
    es.addEventListener("event", (m) => {
      const ev = JSON.parse(m.data);
      state.received.push(ev.seq);
      state.lastSeq = ev.seq;
      if (ev.item) renderItem(ev.item);
    });
    es.addEventListener("status", (m) => renderStatus(JSON.parse(m.data)));
  }

  const m = location.pathname.match(/^\/s\/([^/]+)$/);
  const rp = location.pathname.match(/^\/s\/([^/]+)\/replay$/);
  (rp ? replayView(decodeURIComponent(rp[1])) : m ? sessionView(decodeURIComponent(m[1])) : sessionsView()).catch(fail);
})();

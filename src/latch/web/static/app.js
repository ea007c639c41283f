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

  async function sessionsView() {
    $("sessions-view").hidden = false;
    const body = $("sessions").tBodies[0];
    for (const s of (await getJSON("/api/sessions")).sessions) {
      const tr = el("tr");
      const td = el("td"); const a = el("a", null, s.id);
      a.href = url("/s/" + encodeURIComponent(s.id)); td.append(a); tr.append(td);
      for (const v of [s.format, s.events, s.created_at, s.source]) tr.append(el("td", null, v));
      body.append(tr);
    }
  }

  function renderItem(item) {
    const div = el("div", "item role-" + item.role + (item.is_error ? " is-error" : ""));
    div.dataset.seq = String(item.seq);
    let meta = item.role + " #" + item.seq;
    if (item.name) meta += " " + item.name;
    if (item.subtype) meta += " (" + item.subtype + ")";
    if (item.model) meta += " " + item.model;
    div.append(el("div", "meta", meta));
    if (item.text) div.append(el("pre", "text", item.text));
    for (const c of item.tool_calls || []) div.append(el("div", "call", "\u2192 " + c.name + " [" + c.id + "]"));
    if (item.reasoning_reported) div.append(el("span", "badge reasoning", "reasoning reported"));
    $("transcript").append(div);
  }
  function fill(dl, obj) {
    dl.replaceChildren();
    for (const [k, v] of Object.entries(obj)) {
      if (v !== null && typeof v === "object") continue;
      dl.append(el("dt", null, k), el("dd", null, v === null ? "unknown" : v));
    }
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
    const goal = st.state.goal;
    fill($("state"), Object.assign({}, st.state, { goal: goal ? (goal.text || JSON.stringify(goal)) : null }));
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

  async function sessionView(sid) {
    $("session-view").hidden = false;
    $("title").textContent = sid;
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
  (m ? sessionView(decodeURIComponent(m[1])) : sessionsView()).catch(fail);
})();

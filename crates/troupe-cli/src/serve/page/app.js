// troupe web view. Served by `troupe serve` (live: the API and the event stream, with the token
// from this page's address) or inlined by `troupe timeline --html` (offline: the events are
// embedded in <script type="application/json" id="events">, no requests at all).
(function () {
  "use strict";

  var LANE_W = 130, ROW_H = 16, TOP = 28, LEFT = 10, LABEL_MAX = 140;
  var REFRESH_KINDS = /^(teammate_|request_|permission_|run_|task_|model_call_finished$)/;
  // Kinds after which the selected agent's conversation has grown.
  var CONVERSATION_KINDS = /^(assistant_text|tool_finished|user_message|compaction|model_call_finished)$/;
  var conversationTimer = null;

  var embedded = document.getElementById("events");
  var OFFLINE = !!embedded;
  var token = new URLSearchParams(location.search).get("token") || "";

  var events = [];          // every rendered event, by seq
  var bySeq = new Map();
  var lastSeq = 0;
  var lanes = [];           // agent names, lead first
  var laneIndex = new Map();
  var requests = new Map(); // request_id -> {from, to}
  var selected = null;
  var agentsState = [];
  var CHUNK = 200;
  var head = null, lastChunk = null, lastChunkRows = 0;
  var refreshTimer = null;
  var planLinger = new Map(); // request_id -> time answered here
  // The page holds a window of the stream: the latest events, and older ones fetched by seq
  // as the person scrolls up (or filters). `nextBefore` is where the next older page starts
  // (null: the stream's start is loaded).
  var PAGE = 500;
  var nextBefore = null;
  var loadingOlder = false;
  var streamLast = 0;       // the stream's last seq, as the server last said
  var filter = { agent: "", kind: "", q: "" };
  var filterGen = 0;        // bumped on every filter change: late answers of older ones are dropped
  var olderObserver = null;
  // Whether a run is going on, as the stream tells it: the runs started and not ended yet (by
  // run id: a shared team's workers have runs of their own), and, for a run whose start is older
  // than the loaded events, the server's `run_active` at load (a run holds the run lock) until a
  // run ends. `runHeld` is not refreshed later: a run still holds its lock for a moment after
  // its `run_ended`, so the events decide from then on.
  var openRuns = new Set();
  var runHeld = false;
  var lastRunEnd = null;    // the latest `run_ended`, while no run is going on
  var streamOpen = false;
  // The kind filter's choices: every event kind, as the server lists them (`troupe serve` and
  // `troupe timeline --html` both embed troupe's one list in #event-kinds).
  var kindsList = document.getElementById("event-kinds");
  var KINDS = kindsList ? JSON.parse(kindsList.textContent || "[]") : [];

  function $(id) { return document.getElementById(id); }

  function esc(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  function short(text, max) {
    var flat = String(text == null ? "" : text).replace(/\s+/g, " ").trim();
    return flat.length > max ? flat.slice(0, max - 1) + "…" : flat;
  }

  // ---- API -------------------------------------------------------------------------------

  function withToken(path) {
    return path + (path.indexOf("?") >= 0 ? "&" : "?") + "token=" + encodeURIComponent(token);
  }

  function getJSON(path) {
    return fetch(withToken(path), { cache: "no-store" }).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) { throw new Error((body.error && body.error.message) || ("HTTP " + r.status)); }
        return body;
      });
    });
  }

  function postJSON(path, body) {
    return fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Troupe-Token": token },
      body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().then(function (json) { return { status: r.status, body: json }; },
        function () { return { status: r.status, body: { ok: false, error: { code: "http", message: "HTTP " + r.status } } }; });
    });
  }

  // ---- Event text --------------------------------------------------------------------------

  function describe(e) {
    var s = function (k) { return e[k] == null ? "" : String(e[k]); };
    switch (e.kind) {
      case "run_started": return "run started: " + short(s("prompt"), 80);
      case "run_ended": return "run ended (" + s("outcome") + ", exit " + s("exit_code") + ")" + (e.error ? ": " + short(e.error, 100) : "");
      case "model_call_started": return "model call " + s("call") + " started";
      case "model_retry": return "model " + s("model") + " failed (attempt " + s("attempt") + "), retrying: " + short(s("error"), 90);
      case "model_fallback": return "model " + s("from") + " failed, falling back to " + s("to");
      case "model_call_finished": return "model " + s("model") + " answered in " + s("latency_ms") + " ms (" + s("finish_reason") + (e.tokens_in != null ? ", " + s("tokens_in") + " in / " + s("tokens_out") + " out tokens" : "") + (e.attempts > 1 ? ", " + s("attempts") + " attempts" : "") + (e.fallback_used ? ", fallback" : "") + ")";
      case "model_call_failed": return "model call failed [" + s("code") + "]: " + short(s("error"), 110);
      case "assistant_text": return "says: " + short(s("text"), 160);
      case "tool_started": return "tool " + s("tool") + " " + short(s("preview"), 70);
      case "tool_finished":
        if (e.outcome === "denied") { return "tool " + s("tool") + " DENIED (" + s("rule") + "): " + short(s("denial_reason"), 100); }
        if (e.outcome === "error") { return "tool " + s("tool") + " failed after " + s("duration_ms") + " ms: " + short(s("preview"), 100); }
        return "tool " + s("tool") + " ok in " + s("duration_ms") + " ms: " + short(s("preview"), 80);
      case "message_sent":
        return s("from") + " → " + s("to") + " [" + s("message_kind") + (e.approved === true ? " approved" : e.approved === false ? " rejected" : "") + "] \"" + short(s("preview"), 60) + "\"";
      case "request_created": return s("protocol") + " request " + s("from") + " → " + s("to") + " (" + s("request_id") + ")";
      case "request_answered": return "answered " + s("protocol") + " request " + s("request_id") + ": " + (e.approved ? "approved" : "rejected");
      case "request_consumed": return s("protocol") + " request " + s("request_id") + " consumed";
      case "request_expired": return s("protocol") + " request " + s("request_id") + " (" + s("from") + " → " + s("to") + ") expired";
      case "approval_asked": return "asks approval for " + s("tool") + " " + short(s("preview"), 70);
      case "approval_answered": return "approval for " + s("tool") + ": " + (e.allowed ? "allowed" : "denied");
      case "permission_requested": return "asks " + s("to") + " permission: " + short(s("summary"), 80) + " (" + s("request_id") + ")";
      case "permission_answered": return "permission for " + s("tool") + " " + (e.approved ? "approved (" + s("choice") + ")" : "denied") + " by " + s("by") + (e.reason ? ": " + short(e.reason, 80) : "");
      case "permission_expired": return "permission request " + s("request_id") + " for " + s("tool") + " expired: denied";
      case "compaction": return "compaction (" + s("how") + "): " + s("messages_before") + " → " + s("messages_after") + " messages";
      case "job_started": return "job " + s("job_id") + " started: " + short(s("command"), 80);
      case "job_ended": return "job " + s("job_id") + " " + s("status");
      case "cron_fired": return "cron " + s("job_id") + " fired: " + short(s("prompt"), 80);
      case "teammate_spawned": return "spawned as " + s("role");
      case "teammate_status": return "is " + s("status") + (e.detail ? ": " + short(e.detail, 80) : "");
      case "user_message": return "a person says: " + short(s("text"), 120);
      case "teammate_merged": return s("branch") + " merged (" + (e.fast_forward ? "fast-forward" : "merge commit") + ")";
      case "merge_conflict": return s("branch") + " conflicts in " + (e.files || []).join(", ") + " (merge aborted)";
      case "task_created": return "task created: " + short(s("subject"), 80) + (e.assignee ? " for " + e.assignee : "") + (e.tags ? " [" + e.tags.join(", ") + "]" : "");
      case "task_claimed": return "claimed task " + short(s("subject"), 80) + (e.lease_expires_at ? ", lease until " + e.lease_expires_at : "");
      case "task_completed": return "completed task " + short(s("subject"), 80);
      case "task_lease_expired": return "task " + short(s("subject"), 80) + " back on the board: " + short(s("reason"), 80);
      case "task_released": return "gave task " + short(s("subject"), 80) + " back: " + short(s("reason"), 80);
      default:
        var parts = [];
        Object.keys(e).forEach(function (k) {
          if (["seq", "at", "run_id", "agent", "kind"].indexOf(k) < 0) { parts.push(k + "=" + short(e[k], 40)); }
        });
        return e.kind.replace(/_/g, " ") + (parts.length ? ": " + parts.join(" ") : "");
    }
  }

  function fullText(e) {
    return "#" + e.seq + " " + e.at + " " + e.agent + " " + e.kind + "\n" + describe(e);
  }

  // ---- The run -----------------------------------------------------------------------------

  function noteRun(e) {
    if (e.agent !== "troupe") { return; }
    if (e.kind === "run_started") {
      openRuns.add(e.run_id);
      lastRunEnd = null;
    } else if (e.kind === "run_ended") {
      openRuns.delete(e.run_id);
      runHeld = false;
      lastRunEnd = e;
    }
  }

  // The header's indicator: the event stream's state, and while it is open, the run's: `live`
  // while a run is going on, `run ended` once it has (and `live` again when another starts).
  function showConnection() {
    var conn = $("connection");
    var running = runHeld || openRuns.size > 0;
    var run = running ? "running" : lastRunEnd ? "ended" : "none";
    document.body.dataset.run = run;
    if (!streamOpen) { return; }
    if (running) {
      conn.textContent = "live";
      conn.className = "live";
      conn.title = "A run is going on; the page follows it.";
    } else if (lastRunEnd) {
      conn.textContent = "run ended" + (lastRunEnd.outcome ? " (" + lastRunEnd.outcome + ")" : "");
      conn.className = "ended";
      conn.title = "The run ended at " + clock(lastRunEnd.at) + " UTC; the page shows the next run on this workspace live.";
    } else {
      conn.textContent = "no run going on";
      conn.className = "ended";
      conn.title = "No run is going on; the page shows the next run on this workspace live.";
    }
  }

  // ---- Timeline ----------------------------------------------------------------------------

  function addLane(name) {
    if (!name || name === "troupe" || laneIndex.has(name)) { return false; }
    laneIndex.set(name, lanes.length);
    lanes.push(name);
    return true;
  }

  function laneX(name) { return LEFT + laneIndex.get(name) * LANE_W + LANE_W / 2; }

  // Lanes an event needs; returns true when a new one appeared.
  function noteLanes(e) {
    var grew = false;
    if (e.kind === "request_created") { requests.set(e.request_id, { from: e.from, to: e.to }); }
    grew = addLane(e.agent) || grew;
    if (e.kind === "message_sent" || e.kind.indexOf("request_") === 0) {
      grew = addLane(e.from) || grew;
      grew = addLane(e.to) || grew;
    }
    return grew;
  }

  function ends(e) {
    if (e.kind === "message_sent" || e.kind === "request_created" || e.kind === "request_expired") {
      return e.from && e.to ? [e.from, e.to] : null;
    }
    if (e.kind === "request_answered") {
      var r = requests.get(e.request_id);
      return r ? [e.agent, r.from] : null;
    }
    return null;
  }

  function labelX() { return LEFT + lanes.length * LANE_W + 8; }
  function width() { return labelX() + 900; }

  // One row of the diagram: a plain element with absolutely placed marks (HTML parses several
  // times faster than SVG, which matters at 10 000 rows). Positions come from classes of the
  // generated lane stylesheet: `xI` is lane I's centre, `wK` the width of K lanes.
  function rowHtml(e) {
    var cls = "event";
    if (e.outcome === "denied") { cls += " denied"; }
    if (e.outcome === "error" || e.kind === "model_call_failed" || (e.kind === "teammate_status" && e.status === "failed")) { cls += " failed"; }
    var out = '<div class="' + cls + '" data-seq="' + e.seq + '" data-kind="' + esc(e.kind) + '" data-agent="' + esc(e.agent) + '">';
    var pair = ends(e);
    if (e.agent === "troupe" && !pair) {
      out += '<i class="rule"></i>';
    } else if (pair && laneIndex.has(pair[0]) && laneIndex.has(pair[1]) && pair[0] !== pair[1]) {
      var a = laneIndex.get(pair[0]), b = laneIndex.get(pair[1]);
      out += '<i class="arrow x' + Math.min(a, b) + " w" + Math.abs(a - b) + (b > a ? " right" : " left") + '"></i>';
    } else if (laneIndex.has(e.agent)) {
      out += '<i class="mark x' + laneIndex.get(e.agent) + (e.kind === "tool_finished" ? " tool" : "") + '"></i>';
    }
    out += '<span class="label">' + esc(short("#" + e.seq + " " + e.agent + ": " + describe(e), LABEL_MAX)) + "</span>";
    return out + "</div>";
  }

  // Where lanes are: one generated stylesheet, rewritten when a lane appears.
  function laneStyle() {
    var rules = [];
    var n = lanes.length, w = width();
    for (var i = 0; i < n; i++) { rules.push(".x" + i + "{left:" + (LEFT + i * LANE_W + LANE_W / 2) + "px}"); }
    for (var k = 1; k < n; k++) { rules.push(".w" + k + "{width:" + (k * LANE_W) + "px}"); }
    rules.push("#timeline .chunk,#timeline .lanes-head{width:" + w + "px}");
    rules.push("#timeline .label{left:" + labelX() + "px}");
    rules.push("#timeline .rule{left:" + LEFT + "px;width:" + (Math.max(1, n) * LANE_W) + "px}");
    rules.push("#timeline .chunk{background-size:" + (Math.max(1, n) * LANE_W) + "px 100%}");
    var el = $("lane-style");
    if (!el) {
      el = document.createElement("style");
      el.id = "lane-style";
      document.head.appendChild(el);
    }
    el.textContent = rules.join("\n");
  }

  function chunkOpen(rows) {
    return '<div class="chunk" style="contain-intrinsic-size:auto ' + (rows * ROW_H) + 'px">';
  }

  // A chunk holds at most CHUNK rows and is skipped by layout and paint while off screen
  // (content-visibility), so that 10 000 events cost what the visible ones cost.
  function renderTimeline() {
    var box = $("timeline");
    var fromBottom = box.scrollHeight - box.scrollTop;
    laneStyle();
    var parts = ['<div class="lanes-head">'];
    lanes.forEach(function (name, i) {
      parts.push('<div class="lane x' + i + '" data-agent="' + esc(name) + '">' + esc(short(name, 16)) + "</div>");
    });
    parts.push("</div>");
    if (!OFFLINE) {
      parts.push('<div id="older" class="older">' + (nextBefore == null ? "start of the stream" :
        '<button type="button" id="older-button">Load older events</button>') + "</div>");
    }
    for (var start = 0; start < events.length; start += CHUNK) {
      var end = Math.min(events.length, start + CHUNK);
      parts.push(chunkOpen(end - start));
      for (var i = start; i < end; i++) { parts.push(rowHtml(events[i])); }
      parts.push("</div>");
    }
    box.innerHTML = parts.join("");
    box.scrollTop = box.scrollHeight - fromBottom;
    head = box.firstChild;
    var chunks = box.querySelectorAll(".chunk");
    lastChunk = chunks.length ? chunks[chunks.length - 1] : null;
    lastChunkRows = events.length - Math.max(0, chunks.length - 1) * CHUNK;
    watchOlder();
  }

  function appendRows(fresh) {
    var box = $("timeline");
    var at = 0;
    while (at < fresh.length) {
      if (!lastChunk || lastChunkRows >= CHUNK) {
        box.insertAdjacentHTML("beforeend", chunkOpen(0) + "</div>");
        lastChunk = box.lastElementChild;
        lastChunkRows = 0;
      }
      var n = Math.min(CHUNK - lastChunkRows, fresh.length - at);
      var html = "";
      for (var j = 0; j < n; j++) { html += rowHtml(fresh[at + j]); }
      lastChunk.insertAdjacentHTML("beforeend", html);
      lastChunkRows += n;
      at += n;
      lastChunk.style.containIntrinsicSize = "auto " + (lastChunkRows * ROW_H) + "px";
    }
  }

  // Appends new events: rows only, unless a new lane appeared (then everything is redrawn).
  function addEvents(list) {
    var fresh = [];
    var grew = false;
    list.forEach(function (e) {
      if (typeof e.seq !== "number" || e.seq <= lastSeq || bySeq.has(e.seq)) { return; }
      lastSeq = e.seq;
      streamLast = Math.max(streamLast, e.seq);
      if (!OFFLINE) { noteRun(e); }
      if (!matches(e)) { return; }
      grew = noteLanes(e) || grew;
      bySeq.set(e.seq, e);
      events.push(e);
      fresh.push(e);
    });
    document.body.dataset.lastSeq = String(lastSeq);
    if (!OFFLINE) { showConnection(); }
    if (!fresh.length) { return fresh; }
    var box = $("timeline");
    var atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
    if (grew || !head) { renderTimeline(); } else { appendRows(fresh); }
    if (atEnd && !OFFLINE) { box.scrollTop = box.scrollHeight; }
    countEvents();
    return fresh;
  }

  function countEvents() {
    var loaded = events.length + " events";
    if (!OFFLINE && nextBefore != null) { loaded += " loaded, back to #" + (events.length ? events[0].seq : nextBefore) + " of " + streamLast; }
    $("event-count").textContent = "(" + loaded + ")";
    document.body.dataset.firstSeq = String(events.length ? events[0].seq : 0);
    document.body.dataset.loaded = String(events.length);
  }

  function matches(e) {
    if (filter.agent && e.agent !== filter.agent) { return false; }
    if (filter.kind && e.kind !== filter.kind) { return false; }
    if (filter.q && JSON.stringify(e).toLowerCase().indexOf(filter.q.toLowerCase()) < 0) { return false; }
    return true;
  }

  // ---- Older events ------------------------------------------------------------------------

  function olderQuery(before) {
    var q = "/api/events?before=" + before + "&limit=" + PAGE;
    if (filter.agent) { q += "&agent=" + encodeURIComponent(filter.agent); }
    if (filter.kind) { q += "&kind=" + encodeURIComponent(filter.kind); }
    if (filter.q) { q += "&q=" + encodeURIComponent(filter.q); }
    return q;
  }

  // Older events go above the loaded ones; the rows in view stay where they are.
  function prependEvents(list) {
    var older = list.filter(function (e) { return typeof e.seq === "number" && !bySeq.has(e.seq); });
    var grew = false;
    older.forEach(function (e) { grew = noteLanes(e) || grew; bySeq.set(e.seq, e); });
    events = older.concat(events);
    var box = $("timeline");
    var fromBottom = box.scrollHeight - box.scrollTop;
    if (grew || !head) {
      renderTimeline();
    } else {
      var html = "";
      for (var start = 0; start < older.length; start += CHUNK) {
        var end = Math.min(older.length, start + CHUNK);
        html += chunkOpen(end - start);
        for (var i = start; i < end; i++) { html += rowHtml(older[i]); }
        html += "</div>";
      }
      var sentinel = $("older");
      sentinel.innerHTML = nextBefore == null ? "start of the stream" : '<button type="button" id="older-button">Load older events</button>';
      sentinel.insertAdjacentHTML("afterend", html);
      if (!lastChunk) { var chunks = box.querySelectorAll(".chunk"); lastChunk = chunks[chunks.length - 1] || null; lastChunkRows = older.length % CHUNK || CHUNK; }
    }
    box.scrollTop = box.scrollHeight - fromBottom;
    countEvents();
  }

  function loadOlder() {
    if (OFFLINE || loadingOlder || nextBefore == null) { return; }
    loadingOlder = true;
    document.body.dataset.loadingOlder = "1";
    var gen = filterGen;
    getJSON(olderQuery(nextBefore)).then(function (page) {
      loadingOlder = false;
      document.body.dataset.loadingOlder = "0";
      if (gen !== filterGen) { return; }
      nextBefore = page.next_before;
      streamLast = Math.max(streamLast, page.last_seq || 0);
      prependEvents(page.events);
      if (olderInView()) { loadOlder(); }
    }, function (err) {
      loadingOlder = false;
      document.body.dataset.loadingOlder = "0";
      $("connection").textContent = "older events: " + err.message;
    });
  }

  function olderInView() {
    var sentinel = $("older");
    if (!sentinel) { return false; }
    var box = $("timeline").getBoundingClientRect(), at = sentinel.getBoundingClientRect();
    return at.bottom > box.top && at.top < box.bottom;
  }

  // Scrolling the top of the loaded events into view asks for the page before them.
  function watchOlder() {
    if (OFFLINE || typeof IntersectionObserver === "undefined") { return; }
    if (!olderObserver) {
      olderObserver = new IntersectionObserver(function (entries) {
        if (entries.some(function (en) { return en.isIntersecting; })) { loadOlder(); }
      }, { root: $("timeline"), rootMargin: "400px 0px 0px 0px" });
    }
    olderObserver.disconnect();
    var sentinel = $("older");
    if (sentinel) { olderObserver.observe(sentinel); }
  }

  // The latest events that match the filter: the page opens on these.
  function loadLatest() {
    var gen = filterGen;
    return getJSON(olderQuery("end")).then(function (page) {
      if (gen !== filterGen) { return; }
      events = [];
      bySeq = new Map();
      head = null;
      nextBefore = page.next_before;
      streamLast = Math.max(streamLast, page.last_seq || 0);
      if (!lastSeq) { lastSeq = page.last_seq || 0; }
      page.events.forEach(function (e) { noteLanes(e); bySeq.set(e.seq, e); events.push(e); });
      renderTimeline();
      countEvents();
      var box = $("timeline");
      box.scrollTop = box.scrollHeight;
    });
  }

  function applyFilter(next) {
    filter = next;
    filterGen++;
    loadingOlder = false;
    document.body.dataset.filter = JSON.stringify(filter);
    return loadLatest();
  }

  function pickEvent(target) {
    var g = target.closest ? target.closest(".event[data-seq]") : null;
    if (!g) { return; }
    var e = bySeq.get(Number(g.getAttribute("data-seq")));
    if (!e) { return; }
    var old = $("timeline").querySelector(".event.picked");
    if (old) { old.classList.remove("picked"); }
    g.classList.add("picked");
    $("event-detail").textContent = fullText(e) + "\n" + JSON.stringify(e, null, 1);
  }

  // ---- Team --------------------------------------------------------------------------------

  function fmtTokens(a) { return (a.tokens_in || 0) + " in / " + (a.tokens_out || 0) + " out"; }
  function fmtCost(a) {
    if (a.cost_usd == null) { return "cost —"; }
    var partial = a.unpriced_models && a.unpriced_models.length ? "*" : "";
    return "~$" + Number(a.cost_usd).toFixed(4) + partial;
  }
  // Why the cost is what it is: an estimate from list prices, without the models that have none.
  function costTitle(a) {
    var unpriced = a.unpriced_models || [];
    var note = "estimate from list prices (troupe usage)";
    return unpriced.length ? note + "; no price for " + unpriced.join(", ") : note;
  }

  // A role that only repeats the name (the lead's, a `writer` spawned as `writer`) is not shown.
  function showRole(a) { return !!a.role && a.role !== a.name; }

  function renderAgents(list) {
    agentsState = list;
    var box = $("agents");
    var html = list.map(function (a) {
      return '<div class="agent' + (a.name === selected ? " selected" : "") + '" data-agent="' + esc(a.name) + '">' +
        '<span class="name">' + esc(a.name) + (showRole(a) ? ' <span class="role">' + esc(a.role) + "</span>" : "") + "</span>" +
        '<span class="status ' + esc(a.status || "") + '">' + esc(a.status || "") + "</span>" +
        '<span class="tokens">' + esc(fmtTokens(a)) + '</span>' +
        '<span class="cost" title="' + esc(costTitle(a)) + '">' + esc(fmtCost(a)) + '</span></div>';
    }).join("");
    box.innerHTML = html || '<p class="empty">No agents yet.</p>';
    var select = $("send-agent");
    if (select) {
      var current = select.value;
      select.innerHTML = list.map(function (a) { return '<option value="' + esc(a.name) + '">' + esc(a.name) + "</option>"; }).join("");
      if (current && list.some(function (a) { return a.name === current; })) { select.value = current; }
    }
    var pick = $("filter-agent");
    if (pick) {
      var chosen = pick.value;
      pick.innerHTML = '<option value="">every agent</option>' + list.map(function (a) { return '<option value="' + esc(a.name) + '">' + esc(a.name) + "</option>"; }).join("");
      pick.value = chosen;
    }
    var grew = false;
    list.forEach(function (a) { grew = addLane(a.name) || grew; });
    if (grew && head) { renderTimeline(); }
  }

  // Offline: the team as the events tell it.
  function agentsFromEvents() {
    var map = new Map();
    lanes.forEach(function (name) { map.set(name, { name: name, role: name === "lead" ? "lead" : "", status: "", tokens_in: 0, tokens_out: 0, cost_usd: null }); });
    events.forEach(function (e) {
      // The lead works while a run goes on (as the live page's `/api/state` says it).
      if (e.agent === "troupe" && map.has("lead")) {
        if (e.kind === "run_started") { map.get("lead").status = "running"; }
        if (e.kind === "run_ended") { map.get("lead").status = "idle"; }
      }
      var a = map.get(e.agent);
      if (!a) { return; }
      if (e.kind === "teammate_spawned") { a.role = e.role || ""; a.status = "running"; }
      if (e.kind === "teammate_status") { a.status = e.status || ""; }
      if (e.kind === "model_call_finished") { a.tokens_in += e.tokens_in || 0; a.tokens_out += e.tokens_out || 0; a.model = e.model; }
    });
    return Array.from(map.values());
  }

  function selectAgent(name, quiet) {
    selected = name;
    Array.prototype.forEach.call(document.querySelectorAll("#agents .agent"), function (el) {
      el.classList.toggle("selected", el.getAttribute("data-agent") === name);
    });
    $("conversation-agent").textContent = name;
    var box = $("conversation");
    if (OFFLINE) {
      var said = events.filter(function (e) { return e.agent === name && (e.kind === "assistant_text" || e.kind === "user_message"); });
      box.innerHTML = said.length ? said.map(function (e) {
        var role = e.kind === "assistant_text" ? "assistant" : "user";
        return '<div class="message" data-role="' + role + '"><div class="role">' + role + ' #' + e.seq + '</div><div class="content">' + esc(e.text || "") + "</div></div>";
      }).join("") : '<p class="empty">Nothing said in the recorded events.</p>';
      return;
    }
    if (!quiet) { box.innerHTML = '<p class="empty">Loading…</p>'; }
    getJSON("/api/conversation?agent=" + encodeURIComponent(name)).then(function (c) {
      if (selected !== name) { return; }
      // A reader at the end keeps following; one scrolled up keeps their place.
      var atEnd = !quiet || box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
      var top = box.scrollTop;
      box.innerHTML = c.messages.length ? c.messages.map(renderMessage).join("") : '<p class="empty">No conversation yet.</p>';
      box.scrollTop = atEnd ? box.scrollHeight : top;
    }, function (err) {
      box.innerHTML = '<p class="error">' + esc(err.message) + "</p>";
    });
  }

  function renderMessage(entry) {
    var m = entry.message || {};
    var role = m.role || "?";
    var content = m.content || "";
    var calls = (m.tool_calls || []).map(function (c) {
      var fn = c.function || c;
      return "→ " + (fn.name || c.name || "tool") + " " + short(fn.arguments || c.arguments || "", 400);
    }).join("\n");
    var body = [content, calls].filter(Boolean).join("\n");
    return '<div class="message" data-role="' + esc(role) + '" data-origin="' + esc(entry.origin || "") + '"><div class="role">' + esc(role) +
      (entry.origin && entry.origin !== "runtime" ? " · " + esc(entry.origin) : "") + '</div><div class="content">' + esc(body) + "</div></div>";
  }

  // ---- Plans -------------------------------------------------------------------------------

  function renderPlans(list) {
    var box = $("plans");
    var listed = new Set(list.map(function (p) { return p.request_id; }));
    Array.prototype.forEach.call(box.querySelectorAll(".plan"), function (el) {
      var id = el.getAttribute("data-request");
      var answered = planLinger.get(id);
      // An answered plan stays a moment so that its result can be read.
      if (!listed.has(id) && !(answered && Date.now() - answered < 4000)) { el.remove(); }
    });
    list.forEach(function (p) {
      if (box.querySelector('.plan[data-request="' + CSS.escape(p.request_id) + '"]')) { return; }
      var el = document.createElement("div");
      el.className = "plan";
      el.setAttribute("data-request", p.request_id);
      el.innerHTML = '<div class="meta">' + esc(p.from) + " → " + esc(p.to) + " · " + esc(p.request_id) + " · expires " + esc(p.expires_at) + "</div>" +
        '<div class="text">' + esc(p.plan) + "</div>" +
        '<textarea class="feedback" rows="2" placeholder="Feedback (optional)"></textarea>' +
        '<button class="approve" type="button">Approve</button> <button class="reject" type="button">Reject</button>' +
        '<div class="result"></div>';
      box.appendChild(el);
    });
    var empty = box.querySelector(".empty");
    if (box.querySelector(".plan")) { if (empty) { empty.remove(); } } else if (!empty) { box.innerHTML = '<p class="empty">None.</p>'; }
  }

  function answerPlan(el, approve) {
    var id = el.getAttribute("data-request");
    var result = el.querySelector(".result");
    var feedback = el.querySelector(".feedback").value;
    el.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    result.className = "result";
    result.textContent = approve ? "Approving…" : "Rejecting…";
    var body = { request_id: id, approve: approve };
    if (feedback.trim()) { body.feedback = feedback; }
    postJSON("/api/review", body).then(function (r) {
      if (r.body.ok) {
        planLinger.set(id, Date.now());
        result.className = "result ok";
        result.textContent = (approve ? "Approved" : "Rejected") + "; response delivered to " + r.body.recipient + ".";
        setTimeout(function () { refreshState(); }, 4100);
      } else {
        result.className = "result error";
        result.textContent = "Refused [" + r.body.error.code + "]: " + r.body.error.message;
        el.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
      }
      refreshState();
    }, function (err) {
      result.className = "result error";
      result.textContent = String(err);
      el.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
    });
  }

  // ---- Permission requests -----------------------------------------------------------------

  // A pending permission request's content is what a model asked for: every piece of it goes
  // into text nodes (`textContent`), never into markup.
  var permissionLinger = new Map(); // request_id -> time answered (or found answered) here

  function node(tag, cls, text) {
    var el = document.createElement(tag);
    if (cls) { el.className = cls; }
    if (text != null) { el.textContent = String(text); }
    return el;
  }

  function button(cls, label, choice) {
    var b = node("button", cls, label);
    b.type = "button";
    b.setAttribute("data-choice", choice);
    return b;
  }

  // The diff as preformatted lines, added and removed ones marked.
  function diffBlock(preview) {
    var pre = node("pre", "diff");
    String(preview).split("\n").forEach(function (line, i, all) {
      if (i === all.length - 1 && line === "") { return; }
      var cls = /^(\+\+\+|---)/.test(line) ? "file" : line.charAt(0) === "+" ? "add" : line.charAt(0) === "-" ? "del" : line.indexOf("@@") === 0 ? "hunk" : "same";
      pre.appendChild(node("span", cls, line));
      pre.appendChild(document.createTextNode("\n"));
    });
    return pre;
  }

  function permissionCard(p) {
    var el = node("div", "permission");
    el.setAttribute("data-request", p.request_id);
    el.appendChild(node("div", "meta", p.agent + " → " + p.target + " · " + p.request_id + " · expires " + p.expires_at));
    if (p.unreadable) {
      el.appendChild(node("div", "result error", "This request cannot be read: " + p.unreadable));
      return el;
    }
    el.setAttribute("data-tool", p.tool);
    el.appendChild(node("div", "call", p.agent + " wants to run " + p.tool + (p.sandbox ? " (sandbox: " + p.sandbox + ")" : "")));
    var command = p.arguments && typeof p.arguments.command === "string" ? p.arguments.command : null;
    if (command != null) {
      el.appendChild(node("pre", "command", command));
    } else {
      el.appendChild(node("div", "summary", p.summary));
    }
    if (p.preview) {
      el.appendChild(diffBlock(p.preview));
    } else if (command == null) {
      el.appendChild(node("pre", "arguments", JSON.stringify(p.arguments, null, 2)));
    }
    el.appendChild(node("div", "why", "Asked because: " + p.reason));
    var reason = node("input", "reason");
    reason.type = "text";
    reason.placeholder = "Reason for the agent, if you deny (optional)";
    el.appendChild(reason);
    var buttons = node("div", "buttons");
    buttons.appendChild(button("once", "Approve once", "once"));
    if (p.suggestion) {
      var always = button("always", "Always this run: " + p.suggestion, "always");
      buttons.appendChild(always);
      buttons.appendChild(button("save", "Save to troupe.toml: " + p.suggestion, "save"));
    }
    buttons.appendChild(button("deny", "Deny", "no"));
    el.appendChild(buttons);
    el.appendChild(node("div", "result"));
    return el;
  }

  function renderPermissions(list) {
    var box = $("permissions");
    list = list || [];
    var listed = new Set(list.map(function (p) { return p.request_id; }));
    Array.prototype.forEach.call(box.querySelectorAll(".permission"), function (el) {
      var id = el.getAttribute("data-request");
      var answered = permissionLinger.get(id);
      // An answered request stays a moment so that its result can be read.
      if (!listed.has(id) && !(answered && Date.now() - answered < 4000)) { el.remove(); }
    });
    list.forEach(function (p) {
      if (box.querySelector('.permission[data-request="' + CSS.escape(p.request_id) + '"]')) { return; }
      box.appendChild(permissionCard(p));
    });
    var empty = box.querySelector(".empty");
    if (box.querySelector(".permission")) { if (empty) { empty.remove(); } } else if (!empty) { box.appendChild(node("p", "empty", "Nothing.")); }
  }

  var CHOICE_DONE = { once: "Approved once", always: "Approved for this run", save: "Approved and saved", no: "Denied" };

  function answerPermission(el, choice) {
    var id = el.getAttribute("data-request");
    var result = el.querySelector(".result");
    var reason = el.querySelector("input.reason").value;
    var buttons = el.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    result.className = "result";
    result.textContent = choice === "no" ? "Denying…" : "Approving…";
    var body = { request_id: id, choice: choice };
    if (choice === "no" && reason.trim()) { body.reason = reason; }
    postJSON("/api/permission", body).then(function (r) {
      if (r.body.ok) {
        permissionLinger.set(id, Date.now());
        result.className = "result ok";
        result.textContent = CHOICE_DONE[choice] + "; " + r.body.agent + " is told." + (r.body.saved ? " " + r.body.saved : "");
        setTimeout(function () { refreshState(); }, 4100);
      } else if (r.status === 409) {
        // Someone answered first (another terminal, the run's own prompt, the lead): say who.
        permissionLinger.set(id, Date.now());
        result.className = "result error";
        result.textContent = "Not recorded: answered already. " + r.body.error.message;
        setTimeout(function () { refreshState(); }, 4100);
      } else {
        result.className = "result error";
        result.textContent = "Refused [" + r.body.error.code + "]: " + r.body.error.message;
        buttons.forEach(function (b) { b.disabled = false; });
      }
      refreshState();
    }, function (err) {
      result.className = "result error";
      result.textContent = String(err);
      buttons.forEach(function (b) { b.disabled = false; });
    });
  }

  // ---- Cost over time ----------------------------------------------------------------------

  // The server's `cost_series`: cumulative estimated USD at a bounded number of points, per agent
  // and in total. Drawn as inline SVG: the total as a line with a dot per point, each agent as a
  // thin line under it.
  var CHART_W = 330, CHART_H = 170, PAD_L = 52, PAD_R = 10, PAD_T = 10, PAD_B = 34;
  var AGENT_COLOURS = ["#b7791f", "#17692e", "#7b3fa0", "#c0262d", "#2a7f8f", "#666"];

  function usd(v, digits) { return "$" + Number(v).toFixed(digits); }
  function clock(at) { return String(at).slice(11, 19); }

  function renderCost(series) {
    var box = $("cost-chart");
    var points = (series && series.points) || [];
    var unpriced = (series && series.unpriced_models) || [];
    var note = $("cost-unpriced");
    note.hidden = !unpriced.length;
    note.textContent = unpriced.length ? "no price for " + unpriced.join(", ") + ": their tokens are not counted" : "";
    if (!points.length) {
      $("cost-total").textContent = "";
      box.innerHTML = '<p class="empty">No priced model call yet.</p>';
      return;
    }
    var total = series.total_usd;
    var said = "Estimated cost over time: ~" + usd(total, 4) + " in total at " + clock(points[points.length - 1].at) +
      " UTC, " + points.length + (points.length === 1 ? " point" : " points") + (unpriced.length ? "; no price for " + unpriced.join(", ") : "");
    $("cost-total").textContent = "~" + usd(total, 4);
    var t0 = Date.parse(points[0].at), t1 = Date.parse(points[points.length - 1].at);
    var top = 0;
    points.forEach(function (p) { top = Math.max(top, p.total_usd); });
    if (!(top > 0)) { top = 1; }
    var plotW = CHART_W - PAD_L - PAD_R, plotH = CHART_H - PAD_T - PAD_B;
    function x(p) { return PAD_L + (t1 > t0 ? (Date.parse(p.at) - t0) / (t1 - t0) * plotW : plotW / 2); }
    function y(v) { return PAD_T + plotH - v / top * plotH; }
    function line(values, cls, colour) {
      var d = values.map(function (v) { return v.x.toFixed(1) + "," + v.y.toFixed(1); }).join(" ");
      return '<polyline class="' + cls + '" fill="none" stroke="' + colour + '" points="' + d + '"/>';
    }
    var agents = [];
    points.forEach(function (p) { Object.keys(p.agents).forEach(function (a) { if (agents.indexOf(a) < 0) { agents.push(a); } }); });
    var svg = '<svg role="img" width="' + CHART_W + '" height="' + CHART_H + '" viewBox="0 0 ' + CHART_W + " " + CHART_H + '"' +
      ' aria-label="' + esc(said) + '" data-points="' + points.length + '" data-total="' + esc(total) + '">' +
      "<title>" + esc(said) + "</title>" +
      '<line class="axis" x1="' + PAD_L + '" y1="' + (PAD_T + plotH) + '" x2="' + (PAD_L + plotW) + '" y2="' + (PAD_T + plotH) + '"/>' +
      '<line class="axis" x1="' + PAD_L + '" y1="' + PAD_T + '" x2="' + PAD_L + '" y2="' + (PAD_T + plotH) + '"/>' +
      '<text class="tick" x="' + (PAD_L - 4) + '" y="' + (PAD_T + 4) + '" text-anchor="end">' + esc(usd(top, top < 1 ? 4 : 2)) + "</text>" +
      '<text class="tick" x="' + (PAD_L - 4) + '" y="' + (PAD_T + plotH) + '" text-anchor="end">$0</text>' +
      '<text class="axis-label" x="12" y="' + (PAD_T + plotH / 2) + '" text-anchor="middle" transform="rotate(-90 12 ' + (PAD_T + plotH / 2) + ')">USD</text>' +
      '<text class="tick" x="' + PAD_L + '" y="' + (PAD_T + plotH + 13) + '" text-anchor="start">' + esc(clock(points[0].at)) + "</text>" +
      '<text class="tick" x="' + (PAD_L + plotW) + '" y="' + (PAD_T + plotH + 13) + '" text-anchor="end">' + esc(clock(points[points.length - 1].at)) + "</text>" +
      '<text class="axis-label" x="' + (PAD_L + plotW / 2) + '" y="' + (CHART_H - 4) + '" text-anchor="middle">time (UTC)</text>';
    agents.forEach(function (a, i) {
      var values = points.filter(function (p) { return p.agents[a] != null; }).map(function (p) { return { x: x(p), y: y(p.agents[a]) }; });
      svg += '<g class="agent-line" data-agent="' + esc(a) + '"><title>' + esc(a + ": ~" + usd(values.length ? points[points.length - 1].agents[a] : 0, 4)) + "</title>" +
        line(values, "agent-cost", AGENT_COLOURS[i % AGENT_COLOURS.length]) + "</g>";
    });
    svg += line(points.map(function (p) { return { x: x(p), y: y(p.total_usd) }; }), "total-cost", "#2457a6");
    points.forEach(function (p) {
      svg += '<circle class="point" r="2.5" cx="' + x(p).toFixed(1) + '" cy="' + y(p.total_usd).toFixed(1) + '"><title>' +
        esc(clock(p.at) + " UTC: ~" + usd(p.total_usd, 4)) + "</title></circle>";
    });
    svg += "</svg>";
    var legend = agents.map(function (a, i) {
      return '<span class="key"><span class="swatch" style="background:' + AGENT_COLOURS[i % AGENT_COLOURS.length] + '"></span>' + esc(a) + "</span>";
    }).join("");
    box.innerHTML = svg + '<div class="legend"><span class="key"><span class="swatch total"></span>total</span>' + legend + "</div>";
  }

  // ---- State and stream --------------------------------------------------------------------

  function applyState(state) {
    $("workspace").textContent = state.workspace;
    renderAgents(state.agents);
    renderPermissions(state.pending_permissions);
    renderPlans(state.pending_plans);
    renderCost(state.cost_series);
  }

  function refreshState() {
    return getJSON("/api/state").then(applyState, function (err) {
      $("connection").textContent = "state: " + err.message;
    });
  }

  function scheduleConversation() {
    if (conversationTimer) { return; }
    conversationTimer = setTimeout(function () {
      conversationTimer = null;
      if (selected) { selectAgent(selected, true); }
    }, 300);
  }

  function scheduleRefresh() {
    if (refreshTimer) { return; }
    refreshTimer = setTimeout(function () { refreshTimer = null; refreshState(); }, 150);
  }

  function connect() {
    var conn = $("connection");
    var source = new EventSource(withToken("/api/events/stream?since=" + lastSeq));
    source.onopen = function () { streamOpen = true; showConnection(); };
    source.onerror = function () { streamOpen = false; conn.textContent = "reconnecting…"; conn.className = "lost"; conn.title = ""; };
    source.addEventListener("event", function (m) {
      var e;
      try { e = JSON.parse(m.data); } catch (err) { return; }
      var added = addEvents([e]);
      if (added.length && REFRESH_KINDS.test(e.kind)) { scheduleRefresh(); }
      if (added.length && e.agent === selected && CONVERSATION_KINDS.test(e.kind)) { scheduleConversation(); }
    });
  }

  function wire() {
    $("agents").addEventListener("click", function (ev) {
      var el = ev.target.closest(".agent[data-agent]");
      if (el) { selectAgent(el.getAttribute("data-agent")); }
    });
    $("timeline").addEventListener("click", function (ev) {
      if (ev.target.id === "older-button") { loadOlder(); return; }
      pickEvent(ev.target);
    });
    $("filter-kinds").innerHTML = KINDS.map(function (k) { return '<option value="' + k + '">'; }).join("");
    $("filter").addEventListener("submit", function (ev) {
      ev.preventDefault();
      applyFilter({ agent: $("filter-agent").value, kind: $("filter-kind").value.trim(), q: $("filter-text").value.trim() });
    });
    $("filter-clear").addEventListener("click", function () {
      $("filter-agent").value = ""; $("filter-kind").value = ""; $("filter-text").value = "";
      applyFilter({ agent: "", kind: "", q: "" });
    });
    $("timeline").addEventListener("mouseover", function (ev) {
      var g = ev.target.closest ? ev.target.closest(".event[data-seq]") : null;
      if (g && !$("timeline").querySelector(".event.picked")) {
        var e = bySeq.get(Number(g.getAttribute("data-seq")));
        if (e) { $("event-detail").textContent = fullText(e); }
      }
    });
    $("permissions").addEventListener("click", function (ev) {
      var button = ev.target.closest("button[data-choice]");
      if (button) { answerPermission(button.closest(".permission"), button.getAttribute("data-choice")); }
    });
    $("plans").addEventListener("click", function (ev) {
      var button = ev.target.closest("button.approve, button.reject");
      if (button) { answerPlan(button.closest(".plan"), button.classList.contains("approve")); }
    });
    $("send").addEventListener("submit", function (ev) {
      ev.preventDefault();
      var out = $("send-result");
      var agent = $("send-agent").value;
      var text = $("send-text").value;
      if (!agent || !text.trim()) { out.className = "error"; out.textContent = "Choose an agent and write a message."; return; }
      $("send-button").disabled = true;
      out.className = "";
      out.textContent = "Sending…";
      postJSON("/api/send", { agent: agent, text: text }).then(function (r) {
        $("send-button").disabled = false;
        if (r.body.ok) {
          out.className = "ok";
          out.textContent = "Sent to " + r.body.agent + " (" + r.body.message_id + ").";
          $("send-text").value = "";
        } else {
          out.className = "error";
          out.textContent = "Not sent [" + r.body.error.code + "]: " + r.body.error.message;
        }
      }, function (err) {
        $("send-button").disabled = false;
        out.className = "error";
        out.textContent = String(err);
      });
    });
  }

  function ready() { document.body.setAttribute("data-ready", "1"); }

  function start() {
    wire();
    addLane("lead");
    if (OFFLINE) {
      Array.prototype.forEach.call(document.querySelectorAll(".live-only"), function (el) { el.hidden = true; });
      var list = JSON.parse(embedded.textContent || "[]");
      addEvents(list);
      if (!head) { renderTimeline(); }
      renderAgents(agentsFromEvents());
      $("connection").textContent = "exported timeline";
      ready();
      return;
    }
    performance.mark("troupe-start");
    Promise.all([getJSON("/api/state"), loadLatest()]).then(function (both) {
      performance.mark("troupe-loaded");
      runHeld = !!both[0].run_active;
      events.forEach(noteRun);
      showConnection();
      applyState(both[0]);
      if (!head) { renderTimeline(); }
      $("timeline").scrollTop = $("timeline").scrollHeight;
      document.body.dataset.lastSeq = String(lastSeq);
      performance.mark("troupe-rendered");
      ready();
      connect();
    }, function (err) {
      $("connection").textContent = "cannot load: " + err.message;
      $("connection").className = "lost";
    });
  }

  start();
})();

// Skali Studio: live pages. Progressive enhancement only: every page works
// without this script, which makes run, environment and runs-list pages follow their
// event stream and ticks countdowns.
//
// Contract with the pages (see web/stream/frame.go for the frames):
//   <section data-stream="/projects/P/environments/E/runs/5/events" data-last-seq="12">
//     follows that websocket from sequence number 12: each frame
//     {"seq": 13, "run": {...}, "checkpoint": {...}, "fragments": [{"id", "html"}]}
//     replaces the elements with those ids, and those whose data-live
//     names one (outerHTML), sets
//     data-run-status on #run-status (run streams) or on [data-run-id=ID]
//     elements (environment streams), and moves data-last-seq on. A lost
//     connection is retried with backoff and jitter, resuming after the
//     last applied seq; meanwhile #live-banner (role=status, at the top of
//     the viewport) says "Live updates paused — reconnecting in 4 s…",
//     elapsed times stop, and #run-status / #env-state are marked
//     data-stale with "· last known 12s ago" after them. "Reconnected"
//     shows for 3 s once the stream is back.
//   A fragment with no element of its id whose root has
//     data-insert-into="LIST" is inserted into #LIST in data-run-id order,
//     newest first (the runs list: a run that starts appears).
//   #env-state[data-active-revision] (environment page): when a frame's
//     fragment changes it, #env-outdated is shown (the page shows an older
//     revision; reload).
//   [data-live-src="…/live"] (one element per page, data-live-on="any" or
//     run kinds and event types): the page's role-dependent parts,
//     fetched with fetchLive and swapped by id (see the views package doc).
//   <time data-countdown datetime="2026-11-30T14:03:00Z">…</time>
//     shows the time left until that absolute UTC time ("in 52 min"), as
//     views.Countdown renders it, then "checking…"
//     (until the stream brings what happened).
//   [data-dns-pending=DOMAIN] (what to do about a DNS-pending domain) goes
//     once that domain's TLS state is no longer DNS pending.
//   <time data-elapsed datetime="2026-11-30T14:03:00Z">…</time>
//     shows the time since then ("2 min"): how long a run has been running.
//   A run frame with "log": {"position": 4, "first": 12, "lines": [{"n": 12,
//     "at": "…", "text": "…"}]} appends its lines (masked by the server)
//     to #checkpoint-4's .checkpoint-log, filtered by input[data-log-filter].
(function () {
  "use strict";

  // Countdowns and elapsed times, worded as the server words them
  // (humanize.Until and humanize.Duration; a browser test holds both sides
  // to one table).
  var DUE = "checking\u2026";
  function formatRemaining(ms) {
    if (ms <= 0) return DUE;
    var s = Math.ceil(ms / 1000);
    if (s < 60) return "in " + s + " s";
    var m = Math.ceil(s / 60);
    if (m < 60) return "in " + m + " min";
    var h = Math.floor(m / 60);
    m = m % 60;
    return "in " + h + " h" + (m ? " " + (m < 10 ? "0" : "") + m + " min" : "");
  }
  function formatElapsed(ms) {
    if (ms < 1000) return Math.max(0, Math.floor(ms)) + "ms";
    var s = Math.floor(ms / 1000);
    if (s < 60) return s + "s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + " min";
    var h = Math.floor(m / 60);
    m = m % 60;
    return h + "h" + (m ? " " + m + "m" : "");
  }
  window.studioFormat = { until: formatRemaining, elapsed: formatElapsed };

  // offline counts the page's streams that are disconnected: elapsed times
  // stop while it is not zero (the page no longer knows whether the run
  // still runs).
  var offline = 0;
  var onTick = [];
  function tickCountdowns() {
    var now = Date.now();
    document.querySelectorAll("time[data-countdown]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("datetime"));
      if (isNaN(at)) return;
      var text = formatRemaining(at - now);
      if (el.textContent !== text) el.textContent = text;
      el.toggleAttribute("data-due-now", at - now <= 0);
    });
    if (!offline) {
      document.querySelectorAll("time[data-elapsed]").forEach(function (el) {
        var at = Date.parse(el.getAttribute("datetime"));
        if (isNaN(at)) return;
        var text = formatElapsed(now - at);
        if (el.textContent !== text) el.textContent = text;
      });
    }
    onTick.forEach(function (f) { f(now); });
  }
  // A countdown to an automatic check that has said "checking…" for a few
  // seconds without the stream bringing the check (the check was skipped:
  // a reconcile of that domain still ran, say) reads the page's live parts
  // again (fetchLive): the server counts to the check after that one.
  var DUE_REFETCH_MS = 5000;
  var lastRefetch = 0;
  onTick.push(function (now) {
    if (now - lastRefetch < DUE_REFETCH_MS) return;
    var stale = false;
    document.querySelectorAll("[data-next-check] time[data-countdown][data-due-now]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("datetime"));
      if (!isNaN(at) && now - at >= DUE_REFETCH_MS) stale = true;
    });
    if (!stale) return;
    lastRefetch = now;
    fetchLive();
  });

  // One way to refresh on an event (the rule is in the views package's
  // doc). What is the same for every reader comes pushed, as fragments in
  // a stream's frames (apply, below). What depends on the reader's role
  // comes from ONE address per page, its …/live endpoint, which the page
  // names in [data-live-src]: fetchLive(src) reads it (the page's own when
  // src is not given) and puts each top-level element of the answer in
  // place of the page's element of the same id. A part the person is using
  // (focus in it, or text typed into it) waits for the next read, made
  // once they leave it. One read at a time per address; asks that arrive
  // meanwhile make one more. [data-live-on] says which frames of the
  // page's streams ask for a read: "any", or event types, run kinds and
  // run statuses ("backup restore environment.state", "waiting rejected
  // failed cancelled"); without it, only this script asks (a countdown run
  // out, a pushed row without its role-dependent part). The element with
  // data-live-src counts its reads in data-refreshed.
  var livePage = document.querySelector("[data-live-src]");
  var liveReads = {};
  var liveSkipped = false;
  function inUse(el) {
    var a = document.activeElement;
    if (a && a !== document.body && el.contains(a)) return true;
    return Array.prototype.some.call(el.querySelectorAll("input, textarea"), function (i) {
      return i.type !== "hidden" && i.value !== i.defaultValue;
    });
  }
  function fetchLive(src) {
    var own = !src;
    src = src || (livePage && livePage.getAttribute("data-live-src"));
    if (!src || !window.fetch) return;
    var st = liveReads[src] || (liveReads[src] = { busy: false, again: false });
    if (st.busy) {
      st.again = true;
      return;
    }
    st.busy = true;
    fetch(src, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (res) {
        if (res.redirected && own) {
          // Signed out meanwhile: show where the server sends the person.
          location.reload();
          return null;
        }
        return res.ok && !res.redirected ? res.text() : null;
      })
      .then(function (html) {
        if (html === null) return;
        var t = document.createElement("template");
        t.innerHTML = html;
        Array.prototype.slice.call(t.content.children).forEach(function (part) {
          var old = part.id && document.getElementById(part.id);
          if (!old) return;
          if (inUse(old)) {
            liveSkipped = true;
            return;
          }
          old.replaceWith(part);
        });
        if (own && livePage) {
          livePage.setAttribute("data-refreshed", String((parseInt(livePage.getAttribute("data-refreshed") || "0", 10) || 0) + 1));
        }
        tickCountdowns();
      })
      .catch(function () {})
      .then(function () {
        st.busy = false;
        if (st.again) {
          st.again = false;
          fetchLive(own ? undefined : src);
        }
      });
  }
  if (livePage) {
    var liveOn = (livePage.getAttribute("data-live-on") || "").split(/\s+/).filter(Boolean);
    var liveTimer = null;
    var soon = function () {
      clearTimeout(liveTimer);
      liveTimer = setTimeout(function () { fetchLive(); }, 100);
    };
    document.addEventListener("studio:event", function (ev) {
      var f = ev.detail || {};
      var asks = liveOn.some(function (w) {
        return w === "any" || w === f.type || (f.run && (w === f.run.kind || w === f.run.status));
      });
      if (asks) soon();
    });
    livePage.addEventListener("focusout", function () {
      if (!liveSkipped) return;
      liveSkipped = false;
      soon();
    });
  }

  var streams = document.querySelectorAll("[data-stream]");
  if (document.querySelector("time[data-countdown], time[data-elapsed]") || streams.length) {
    tickCountdowns();
    setInterval(tickCountdowns, 1000);
  }

  // The connection banner: one per page, at the top of the viewport, a
  // status region that says when live updates paused, when they come back,
  // and that the page shows the last known state meanwhile.
  var banner = null;
  var bannerHide = null;
  function showBanner(kind, text) {
    if (!banner) {
      banner = document.createElement("div");
      banner.className = "live-banner";
      banner.id = "live-banner";
      banner.setAttribute("role", "status");
      banner.hidden = true;
      (document.querySelector("main") || document.body).prepend(banner);
    }
    if (bannerHide) {
      clearTimeout(bannerHide);
      bannerHide = null;
    }
    banner.setAttribute("data-state", kind || "");
    if (banner.textContent !== (text || "")) banner.textContent = text || "";
    banner.hidden = !text;
  }
  if (streams.length) showBanner("", "");

  // The page's state shown as the last known one while disconnected.
  var staleSelector = "#run-status, #env-state";
  function markStale(since) {
    document.querySelectorAll(staleSelector).forEach(function (st) {
      st.setAttribute("data-stale", "");
      var note = st.nextElementSibling;
      if (!note || !note.hasAttribute("data-stale-note")) {
        note = document.createElement("span");
        note.className = "stale-note";
        note.setAttribute("data-stale-note", "");
        st.after(note);
      }
      var text = "\u00b7 last known " + formatElapsed(Math.max(Date.now() - since, 1000)) + " ago";
      if (note.textContent !== text) note.textContent = text;
    });
  }
  function clearStale() {
    document.querySelectorAll("[data-stale]").forEach(function (st) { st.removeAttribute("data-stale"); });
    document.querySelectorAll("[data-stale-note]").forEach(function (n) { n.remove(); });
  }

  var statusText = { "succeeded-with-warnings": "succeeded · with warnings" };
  var finished = { succeeded: true, "succeeded-with-warnings": true, failed: true, cancelled: true };

  function follow(el) {
    var path = el.getAttribute("data-stream");
    var lastSeq = parseInt(el.getAttribute("data-last-seq") || "0", 10) || 0;
    var isRun = /\/runs\/[^/]+\/events/.test(path);
    // The revision the environment ran when the page was rendered.
    var shown = document.getElementById("env-state");
    var activeRevision = shown ? shown.getAttribute("data-active-revision") : null;
    var attempt = 0;
    var ws = null;
    var stopped = false;
    var timer = null;
    // down is when the connection was lost (0 while live); retryAt when
    // the next attempt starts.
    var down = 0;
    var retryAt = 0;
    var wasDown = false;

    function setState(name) {
      el.setAttribute("data-stream-status", name);
    }

    // paused says so in the banner, and shows the page's state as stale.
    function paused(now) {
      if (!down) return;
      var text = "Live updates paused \u2014 reconnecting\u2026";
      if (retryAt > now) text = "Live updates paused \u2014 reconnecting in " + Math.ceil((retryAt - now) / 1000) + " s\u2026";
      showBanner("paused", text);
      markStale(down);
    }
    onTick.push(paused);

    function goneDown() {
      if (!down) {
        down = Date.now();
        offline++;
      }
      wasDown = true;
    }
    function backUp() {
      if (down) {
        down = 0;
        offline--;
      }
      retryAt = 0;
      if (!offline) {
        clearStale();
        if (wasDown) {
          showBanner("reconnected", "Reconnected");
          bannerHide = setTimeout(function () { showBanner("", ""); }, 3000);
        }
      }
      wasDown = false;
      setState("live");
    }

    function url() {
      var proto = location.protocol === "https:" ? "wss:" : "ws:";
      var sep = path.indexOf("?") < 0 ? "?" : "&";
      return proto + "//" + location.host + path + sep + "after=" + lastSeq;
    }

    function connect() {
      timer = null;
      if (stopped) return;
      setState(attempt ? "reconnecting" : "connecting");
      retryAt = 0;
      paused(Date.now());
      try {
        ws = new WebSocket(url());
      } catch (e) {
        retry(1006);
        return;
      }
      ws.onopen = function () {
        attempt = 0;
        backUp();
      };
      ws.onmessage = function (ev) {
        var frame;
        try {
          frame = JSON.parse(ev.data);
        } catch (e) {
          return;
        }
        apply(frame);
      };
      ws.onclose = function (ev) {
        ws = null;
        if (stopped) return;
        if (ev.code === 4403) {
          setState("closed");
          if (down) {
            down = 0;
            offline--;
          }
          showBanner("closed", "Live updates stopped: you no longer have access. Reload the page.");
          return;
        }
        retry(ev.code);
      };
    }

    // retry waits 0.5 s, 1 s, 2 s … up to 30 s (half of it random, so that
    // the pages of a restarted server do not all come back at once).
    function retry(code) {
      setState("reconnecting");
      if (code !== 1013) goneDown();
      var base = Math.min(30000, 500 * Math.pow(2, attempt));
      attempt++;
      var delay = base / 2 + Math.random() * base / 2;
      if (code === 1013) delay = 100 + Math.random() * 400; // fell behind: resume by replay now
      retryAt = Date.now() + delay;
      paused(Date.now());
      timer = setTimeout(connect, delay);
    }

    // insert adds a fragment the page does not show yet (a run that has
    // just started, on the runs list) to the list its root names in
    // data-insert-into, before the first entry with a lower data-run-id
    // (newest first), updates the range a pager shows of that list, and
    // shows the list if it was empty.
    function insert(html) {
      var t = document.createElement("template");
      t.innerHTML = html;
      var node = t.content.firstElementChild;
      var into = node && node.getAttribute("data-insert-into");
      var list = into && document.getElementById(into);
      if (!list) return false;
      var id = Number(node.getAttribute("data-run-id"));
      // A page of older runs shows neither newer nor older ones than its own.
      var lo = list.getAttribute("data-min-run"), hi = list.getAttribute("data-max-run");
      if ((lo && id < Number(lo)) || (hi && id > Number(hi))) return false;
      var before = null;
      for (var c = list.firstElementChild; c; c = c.nextElementSibling) {
        if (Number(c.getAttribute("data-run-id")) < id) { before = c; break; }
      }
      list.insertBefore(node, before);
      // A pager's "Runs X to Y" follows the list's first and last rows.
      document.querySelectorAll('[data-range-of="' + CSS.escape(into) + '"]').forEach(function (r) {
        var first = r.querySelector("[data-range-first]"), last = r.querySelector("[data-range-last]");
        if (first && list.firstElementChild) first.textContent = list.firstElementChild.getAttribute("data-run-number");
        if (last && list.lastElementChild) last.textContent = list.lastElementChild.getAttribute("data-run-number");
      });
      var hidden = list.closest("[hidden]");
      if (hidden) hidden.hidden = false;
      document.querySelectorAll('[data-empty-of="' + CSS.escape(into) + '"]').forEach(function (e) { e.remove(); });
      return true;
    }

    // keepDNSPending puts what to do about a DNS-pending domain (views'
    // DNSPendingSlot, which depends on the reader's role) back into the
    // swapped row id, which comes pushed with the slot empty: the block it
    // had or, for a deferral seen live, the one the page's live parts
    // have now.
    function keepDNSPending(id, block) {
      var slot = document.getElementById(id + "-dns");
      if (!slot || slot.querySelector(".dns-pending")) return;
      if (block) {
        slot.appendChild(block);
        return;
      }
      var row = document.getElementById(id);
      if (row && row.hasAttribute("data-tls-deferred")) fetchLive();
    }

    function apply(frame) {
      if (typeof frame.seq !== "number" || frame.seq <= lastSeq) return;
      var swapped = {};
      (Array.isArray(frame.fragments) ? frame.fragments : []).forEach(function (f) {
        if (!f || !f.id) return;
        // The element with that id, and every element marked with it in
        // data-live (a state shown in more than one place).
        var targets = Array.prototype.slice.call(document.querySelectorAll('[data-live="' + CSS.escape(f.id) + '"]'));
        var byId = document.getElementById(f.id);
        if (byId && targets.indexOf(byId) < 0) targets.push(byId);
        // What to do about a DNS-pending domain sits under its checkpoint's
        // row on the run page, built for this viewer (Check now is for
        // deployers): a swapped row keeps it.
        var dns = byId && byId.querySelector(".dns-pending");
        // So does its log, which the page's script has been appending to.
        var log = byId && byId.querySelector(".checkpoint-log");
        targets.forEach(function (target) { if (target.isConnected) target.outerHTML = f.html; });
        if (targets.length || insert(f.html)) swapped[f.id] = true;
        keepDNSPending(f.id, dns);
        keepLog(f.id, log);
      });
      if (!el.isConnected) {
        // A fragment replaced the element that carries data-stream (the run
        // header, say): follow on with its replacement.
        var again = document.querySelector('[data-stream="' + CSS.escape(path) + '"]');
        if (again) {
          el = again;
          setState("live");
        }
      }
      var run = frame.run;
      if (run && run.status && isRun && !frame.type && finished[run.status]) {
        // Actions that only make sense while the run goes on (cancel).
        document.querySelectorAll("[data-while-running]").forEach(function (a) { a.remove(); });
      }
      if (run && run.status) {
        if (isRun && !frame.type) {
          var st = document.getElementById("run-status");
          if (st) {
            st.setAttribute("data-run-status", run.status);
            // A badge that says more than the status ("executor lost ·
            // resuming") keeps the words the server rendered.
            if (!swapped["run-status"] && !st.children.length && !st.hasAttribute("data-executor-lost")) {
              st.textContent = statusText[run.status] || run.status;
            }
          }
        } else if (run.id) {
          document.querySelectorAll('[data-run-id="' + String(run.id) + '"] [data-run-status], [data-run-id="' + String(run.id) + '"][data-run-status]')
            .forEach(function (s) { s.setAttribute("data-run-status", run.status); });
        }
      }
      var envState = document.getElementById("env-state");
      if (envState && activeRevision !== null && envState.getAttribute("data-active-revision") !== activeRevision) {
        // A deploy changed what the environment runs: most of the page
        // shows the old revision. Say so, with a link to reload.
        var outdated = document.getElementById("env-outdated");
        if (outdated) outdated.hidden = false;
      }
      if (frame.type === "service.state") {
        // Actions that only make sense while a certificate is pending
        // (Check now), once none is.
        var tls = document.getElementById("tls");
        if (tls && !tls.querySelector('[data-service-state]:not([data-service-state="issued"])')) {
          tls.querySelectorAll("[data-while-pending]").forEach(function (a) { a.remove(); });
        }
        // What to do about a DNS-pending domain, once it no longer is.
        document.querySelectorAll("[data-dns-pending]").forEach(function (d) {
          var badge = document.querySelector('[data-live="service-state-' + CSS.escape(d.getAttribute("data-dns-pending")) + '"]');
          if (badge && badge.getAttribute("data-service-state") !== "DNS pending") d.remove();
        });
      }
      lastSeq = frame.seq;
      el.setAttribute("data-last-seq", String(lastSeq));
      tickCountdowns();
      el.dispatchEvent(new CustomEvent("studio:event", { detail: frame, bubbles: true }));
    }

    window.addEventListener("pagehide", function () {
      stopped = true;
      if (timer) clearTimeout(timer);
      if (ws) ws.close(1000);
    });
    window.addEventListener("pageshow", function (ev) {
      if (ev.persisted && stopped) {
        stopped = false;
        attempt = 0;
        connect();
      }
    });
    connect();
  }

  // Run logs. A checkpoint row's log block (.checkpoint-log) is kept when
  // a live update swaps the row; frames with "log" ({position, first,
  // lines: [{n, at, text}]}, masked by the server) append their lines
  // under their checkpoint, hidden when they do not match the filter box;
  // a log scrolled to its end stays at its end.
  function keepLog(id, log) {
    var row = document.getElementById(id);
    if (!log || !row || log.closest("#" + CSS.escape(id)) === row) return;
    var fresh = row.querySelector(".checkpoint-log");
    if (fresh) fresh.replaceWith(log);
  }
  var filterBox = document.querySelector("input[data-log-filter]");
  function logFilter() {
    return filterBox ? filterBox.value.trim().toLowerCase() : "";
  }
  function matches(li, f) {
    var t = li.querySelector(".log-text");
    return !f || (t && t.textContent.toLowerCase().indexOf(f) >= 0);
  }
  function countLines(block) {
    var all = block.querySelectorAll(".log-line");
    var shown = block.querySelectorAll(".log-line:not([hidden])").length;
    var c = block.querySelector("[data-log-count]");
    if (!c) return;
    var text = all.length === shown ? all.length + (all.length === 1 ? " line" : " lines") : shown + " of " + all.length + " lines match";
    if (c.textContent !== text) c.textContent = text;
  }
  function atEnd(ol) {
    return ol.scrollHeight - ol.scrollTop - ol.clientHeight < 24;
  }
  function lineAt(iso) {
    var d = new Date(iso);
    if (isNaN(d)) return "";
    function p(n, w) { n = String(n); while (n.length < w) n = "0" + n; return n; }
    return p(d.getUTCHours(), 2) + ":" + p(d.getUTCMinutes(), 2) + ":" + p(d.getUTCSeconds(), 2) + "." + p(d.getUTCMilliseconds(), 3);
  }
  function appendLog(log) {
    if (!log || !Array.isArray(log.lines)) return;
    var row = document.getElementById("checkpoint-" + log.position);
    var block = row && row.querySelector(".checkpoint-log");
    var ol = block && block.querySelector(".log-lines");
    if (!ol) return;
    var pinned = block.hidden || !ol.children.length || atEnd(ol);
    var f = logFilter();
    log.lines.forEach(function (l) {
      var id = "L" + l.n;
      if (document.getElementById(id)) return; // rendered with the page already
      var li = document.createElement("li");
      li.className = "log-line";
      li.id = id;
      var a = document.createElement("a");
      a.className = "log-n";
      a.href = "#" + id;
      a.textContent = String(l.n);
      var at = document.createElement("time");
      at.className = "log-at";
      at.setAttribute("datetime", l.at);
      at.textContent = lineAt(l.at);
      var text = document.createElement("span");
      text.className = "log-text";
      text.textContent = l.text;
      li.append(a, at, text);
      li.hidden = !matches(li, f);
      ol.appendChild(li);
    });
    if (block.hidden) {
      block.hidden = false;
      block.open = true;
    }
    countLines(block);
    if (pinned) ol.scrollTop = ol.scrollHeight;
  }
  document.addEventListener("studio:event", function (ev) {
    if (ev.detail && ev.detail.log) appendLog(ev.detail.log);
  });
  if (filterBox) {
    filterBox.addEventListener("input", function () {
      var f = logFilter();
      document.querySelectorAll(".checkpoint-log").forEach(function (block) {
        block.querySelectorAll(".log-line").forEach(function (li) { li.hidden = !matches(li, f); });
        countLines(block);
      });
    });
  }
  // A line's link (#L12, the heading's link to a failed step's last line)
  // unfolds the log that holds it.
  function revealTarget() {
    var id = location.hash.slice(1);
    var t = id && document.getElementById(id);
    if (!t || !t.classList.contains("log-line")) return;
    var d = t.closest("details");
    if (d && !d.open) d.open = true;
    t.hidden = false;
    t.scrollIntoView({ block: "center" });
  }
  window.addEventListener("hashchange", revealTarget);
  revealTarget();
  // The tail of a step under way is in view.
  document.querySelectorAll(".log-lines[data-log-tail]").forEach(function (ol) {
    if (!location.hash) ol.scrollTop = ol.scrollHeight;
  });
  // The timeline of a run the page watches grows: every bar is redrawn
  // against the run's span so far, once a second while it runs and once
  // when it ends (the server drew each row against the span as of its own
  // rendering).
  var timeline = document.querySelector(".checkpoints");
  var runStatus = document.getElementById("run-status");
  var watching = timeline && runStatus && !finished[runStatus.getAttribute("data-run-status")];
  if (watching) {
    onTick.push(function (now) {
      if (offline || !watching) return;
      var st = document.getElementById("run-status");
      var done = st && finished[st.getAttribute("data-run-status")];
      var bars = timeline.querySelectorAll("svg.waterfall");
      var start = NaN, end = done ? 0 : now;
      bars.forEach(function (svg) {
        var rs = Date.parse(svg.getAttribute("data-run-started"));
        if (!isNaN(rs) && !(rs >= start)) start = rs;
        var e = Date.parse(svg.getAttribute("data-ended"));
        if (done && !isNaN(e) && e > end) end = e;
      });
      var span = end - start;
      if (isNaN(span) || span <= 0) return;
      bars.forEach(function (svg) {
        var from = Date.parse(svg.getAttribute("data-started"));
        var to = svg.getAttribute("data-ended") ? Date.parse(svg.getAttribute("data-ended")) : end;
        var bar = svg.querySelector(".waterfall-bar");
        if (isNaN(from) || isNaN(to) || !bar) return;
        var w = Math.max(4, Math.round((to - from) * 1000 / span));
        var x = Math.min(Math.max(0, Math.round((from - start) * 1000 / span)), 1000 - w);
        bar.setAttribute("x", String(x));
        bar.setAttribute("width", String(w));
      });
      if (done) watching = false;
    });
  }

  streams.forEach(follow);

  // The navigation's count of runs waiting for the reader's approval
  // (a[data-approvals-nav] names its live address in data-approvals-live)
  // stays live: a page with a live stream (a run, an environment, runs
  // lists) reads it again within a second of each event pushed to it (a
  // run starting to wait, approved, rejected, voided); every page reads it
  // again every 20 seconds while shown, and when it is shown again.
  var approvals = document.querySelector("a[data-approvals-nav][data-approvals-live]");
  if (approvals) {
    var count = function () {
      if (!document.hidden) fetchLive(approvals.getAttribute("data-approvals-live"));
    };
    window.setInterval(count, 20000);
    document.addEventListener("visibilitychange", count);
    var countSoon = null;
    document.addEventListener("studio:event", function () {
      if (countSoon) return;
      countSoon = window.setTimeout(function () { countSoon = null; count(); }, 1000);
    });
  }
})();

// Skali Studio: the manifest editor, a progressive enhancement of the
// <textarea data-editor> of the validate, new-project and new-revision
// forms. It numbers the lines, and a diagnostic's line link (in the list of
// diagnostics or the verdict) puts the cursor on that line of the editor.
// Without this script the form posts the text or the picked file, and the
// line links lead to the annotated source listing.
//
// Live diagnostics (issue 26): after a pause in typing the text goes to
// POST /validate/check, which runs the same compiler as the form, and each
// diagnostic is painted on its line: a marker in the gutter, its range
// underlined in an overlay behind the text area (a mirror with the same
// font metrics, scrolled with it), its message on hover and while the caret
// is in the range, and a list under the editor. The text area stays the
// editor, so the caret, the selection and the undo history are the
// browser's own. Answers carry the sequence number of their request and a
// stale one is dropped.
(function () {
  "use strict";
  var ta = document.querySelector("textarea[data-editor]");
  if (!ta) return;

  var wrap = document.createElement("div");
  wrap.className = "editor";
  var gutter = document.createElement("div");
  gutter.className = "editor-gutter";
  gutter.setAttribute("aria-hidden", "true");
  var markers = document.createElement("div");
  markers.className = "editor-markers";
  var body = document.createElement("div");
  body.className = "editor-body";
  var mirror = document.createElement("div");
  mirror.className = "editor-mirror";
  mirror.setAttribute("aria-hidden", "true");
  // The mirror's lines move with the text area's scroll position by a
  // transform, which (unlike setting scrollTop) lays nothing out.
  var mirrorLines = document.createElement("div");
  mirrorLines.className = "editor-mirror-lines";
  mirror.appendChild(mirrorLines);
  var tip = document.createElement("div");
  tip.className = "editor-tip";
  tip.id = ta.id + "-tip";
  tip.setAttribute("role", "tooltip");
  tip.hidden = true;
  ta.parentNode.insertBefore(wrap, ta);
  wrap.appendChild(gutter);
  wrap.appendChild(markers);
  wrap.appendChild(body);
  body.appendChild(mirror);
  body.appendChild(ta);
  body.appendChild(tip);
  // Numbers and marks only line up with lines that do not wrap.
  ta.setAttribute("wrap", "off");
  ta.classList.add("editor-text");

  var numbered = 0;
  function renumber() {
    var n = ta.value.split("\n").length;
    if (n === numbered) return;
    numbered = n;
    var parts = new Array(n);
    for (var i = 0; i < n; i++) parts[i] = i + 1;
    gutter.textContent = parts.join("\n");
  }
  // sync lines the gutter, mirror and markers up with the text area's
  // scroll position.
  function sync() {
    var top = ta.scrollTop;
    gutter.scrollTop = top;
    moveOverlay(top, ta.scrollLeft);
    if (!tip.hidden) hideTip();
  }
  // moveOverlay moves the mirror's lines and the markers to a scroll
  // position with transforms only: paint passes the one it read before
  // writing, so that repainting after an answer forces no layout.
  function moveOverlay(top, left) {
    mirrorLines.style.transform = "translate(" + -left + "px," + -top + "px)";
    markers.style.transform = "translateY(" + -top + "px)";
  }
  ta.addEventListener("scroll", function () { sync(); });
  renumber();

  // The text area's line height and top padding, read once per change of
  // its metrics (matchMetrics) rather than at every paint.
  var metrics = null;
  function readMetrics() {
    if (!metrics) {
      var cs = getComputedStyle(ta);
      metrics = { lh: parseFloat(cs.lineHeight) || 20, top: parseFloat(cs.paddingTop) || 0 };
    }
    return metrics;
  }
  function lineHeight() { return readMetrics().lh; }

  function offsetOf(line, col) {
    var lines = ta.value.split("\n");
    if (!(line >= 1 && line <= lines.length)) return -1;
    var start = 0;
    for (var i = 0; i < line - 1; i++) start += lines[i].length + 1;
    // Columns count characters (code points); the text area counts UTF-16 units.
    var chars = Array.from(lines[line - 1]);
    return start + chars.slice(0, Math.max(0, col - 1)).join("").length;
  }
  function gotoLine(n, col) {
    var at = offsetOf(n, col || 1);
    if (at < 0) return false;
    ta.focus({ preventScroll: true });
    ta.setSelectionRange(at, at);
    ta.scrollTop = Math.max(0, (n - 4) * lineHeight());
    sync();
    wrap.scrollIntoView({ block: "center" });
    showCaretTip();
    return true;
  }
  document.addEventListener("click", function (ev) {
    var a = ev.target.closest && ev.target.closest('a[href^="#L"]');
    // The source listing's own line numbers keep linking to its lines.
    if (!a || a.closest(".source")) return;
    if (gotoLine(parseInt(a.getAttribute("href").slice(2), 10), parseInt(a.getAttribute("data-column"), 10) || 1)) ev.preventDefault();
  });

  // ---- Live diagnostics ----

  var form = ta.form;
  var endpoint = "/validate/check";
  var problems = document.createElement("div");
  problems.className = "editor-problems";
  problems.hidden = true;
  var head = document.createElement("p");
  head.className = "editor-problems-head";
  head.setAttribute("role", "status");
  var list = document.createElement("ul");
  list.className = "editor-problems-list";
  problems.appendChild(head);
  problems.appendChild(list);
  wrap.parentNode.insertBefore(problems, wrap.nextSibling);

  var diags = []; // the painted diagnostics
  var seq = 0; // the last request sent
  var timer = 0;
  var editedAt = 0;
  // When the last check was sent and answered and how it went
  // (performance.now()): the phases of "manifest-diagnostics" that
  // BenchmarkKeystrokeToPaint reports.
  var sentAt = 0, answeredAt = 0, timing = {};

  function field(name) { return form && form.elements.namedItem(name); }
  function request() {
    var kind = field("kind"), file = field("filename"), insecure = field("insecure_skip_verify");
    return {
      manifest: ta.value,
      // A form without a kind choice (new project, new revision) takes a skali.yaml.
      kind: kind ? kind.value : "skali",
      filename: file ? file.value : "",
      insecure_skip_verify: !!(insecure && insecure.checked)
    };
  }

  function check() {
    timer = 0;
    var mine = ++seq;
    if (ta.value.trim() === "") {
      paint([], null);
      return;
    }
    // The list says it is being updated only when the answer is slow: a
    // quick one would only make it flash (and render a frame while the
    // request is under way).
    var busy = setTimeout(function () { if (mine === seq) problems.setAttribute("aria-busy", "true"); }, 100);
    var t = { sent: performance.now() };
    var payload = JSON.stringify(request());
    t.encoded = performance.now();
    fetch(endpoint, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Accept": "application/json" },
      body: payload
    }).then(function (resp) {
      t.headers = performance.now();
      clearTimeout(busy);
      return resp.json().then(function (data) { return { ok: resp.ok, data: data }; });
    }).then(function (r) {
      if (mine !== seq) return; // a newer request is on its way
      answeredAt = performance.now();
      sentAt = t.sent;
      timing = t;
      if (!r.ok) {
        paintNote(r.data && r.data.error ? r.data.error : "Live checking is not available; press Validate to check.");
        return;
      }
      paint(r.data.diagnostics || [], r.data);
    }).catch(function () {
      clearTimeout(busy);
      if (mine !== seq) return;
      paintNote("Live checking is not available right now; the form still checks the manifest when sent.");
    });
  }
  function schedule() {
    editedAt = performance.now();
    performance.mark("manifest-edit");
    if (timer) clearTimeout(timer);
    timer = setTimeout(check, 150);
  }

  ta.addEventListener("input", function () { renumber(); sync(); schedule(); });
  if (form) {
    ["kind", "insecure_skip_verify"].forEach(function (n) {
      var f = field(n);
      if (f && f.addEventListener) f.addEventListener("change", schedule);
    });
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }
  // messageInto writes a message, setting `quoted` words in monospace as
  // the server's views do.
  function messageInto(node, msg) {
    var parts = msg.split("`");
    if (parts.length % 2 === 0) { node.textContent = msg; return; }
    parts.forEach(function (p, i) {
      if (p === "") return;
      node.appendChild(i % 2 === 1 ? el("code", "", p) : document.createTextNode(p));
    });
  }
  function count(n, one, many) { return n + " " + (n === 1 ? one : many); }

  function paintNote(text) {
    problems.removeAttribute("aria-busy");
    problems.hidden = false;
    problems.setAttribute("data-state", "unavailable");
    listKey = "";
    head.textContent = text;
    list.textContent = "";
  }

  // paint writes the answer into the page: the reads it needs (scroll
  // position, metrics) come first, then only writes, so the browser lays
  // the page out once, for the next frame (the tip under the caret is
  // placed after that layout, see fitTip).
  function paint(ds, answer) {
    diags = ds;
    var top = ta.scrollTop, left = ta.scrollLeft;
    readMetrics();
    problems.removeAttribute("aria-busy");
    var t = timing;
    t.read = performance.now();
    paintMirror(top, left);
    t.mirror = performance.now();
    paintMarkers();
    t.markers = performance.now();
    if (!answer) {
      listKey = "";
      list.textContent = "";
      head.textContent = "";
      problems.hidden = true;
      problems.setAttribute("data-state", "empty");
      hideTip();
      return;
    }
    problems.hidden = false;
    lastKind = answer.kind || "";
    if (lastKind === "skali") wantSchema();
    paintList(ds, answer);
    t.list = performance.now();
    showCaretTip(top);
    if (editedAt) {
      var since = editedAt, sent = sentAt, answered = answeredAt, written = performance.now();
      editedAt = 0;
      requestAnimationFrame(function () {
        performance.mark("manifest-painted");
        try {
          var now = performance.now();
          performance.measure("manifest-diagnostics", { start: since, end: now });
          // Its phases: waiting for the pause (and the timer), the
          // request, writing the answer, and the wait for the frame.
          performance.measure("manifest-diagnostics-pause", { start: since, end: sent });
          performance.measure("manifest-diagnostics-request", { start: sent, end: answered });
          performance.measure("manifest-diagnostics-write", { start: answered, end: written });
          performance.measure("manifest-diagnostics-frame", { start: written, end: now });
          // The request's own steps, and the write's.
          [["encode", t.sent, t.encoded], ["headers", t.encoded, t.headers], ["body", t.headers, answered],
            ["read", answered, t.read], ["mirror", t.read, t.mirror], ["markers", t.mirror, t.markers],
            ["list", t.markers, t.list], ["tip", t.list, written]].forEach(function (p) {
            if (p[1] && p[2]) performance.measure("manifest-diagnostics-" + p[0], { start: p[1], end: p[2] });
          });
        } catch (e) { /* old browsers */ }
        // And the frame's own style, layout and paint after it: a message
        // posted now is handled once the frame is rendered.
        if (window.MessageChannel) {
          var ch = new MessageChannel();
          ch.port1.onmessage = function () {
            try { performance.measure("manifest-diagnostics-rendered", { start: now, end: performance.now() }); } catch (e) { /* old browsers */ }
          };
          ch.port2.postMessage(0);
        }
      });
    }
  }

  // paintList writes the head and the list under the editor; it writes
  // nothing when the answer says what the list already says.
  var listKey = "";
  function paintList(ds, answer) {
    var key = JSON.stringify([answer.kind_label, answer.errors, answer.warnings, ds]);
    if (key === listKey) return;
    listKey = key;
    list.textContent = "";
    head.textContent = "";
    var errors = answer.errors || 0, warnings = answer.warnings || 0;
    problems.setAttribute("data-state", errors ? "errors" : warnings ? "warnings" : "ok");
    if (errors) head.appendChild(el("span", "badge badge-danger", count(errors, "error", "errors")));
    if (warnings) head.appendChild(el("span", "badge badge-warn", count(warnings, "warning", "warnings")));
    if (!errors && !warnings) head.appendChild(el("span", "badge badge-ok", "No problems"));
    head.appendChild(el("span", "editor-problems-kind", (answer.kind_label || "") + (errors ? "" : " · checked as you type")));
    ds.forEach(function (d) {
      var li = el("li", "diagnostic-" + d.severity);
      li.setAttribute("data-line", d.line);
      li.appendChild(el("span", "badge " + (d.severity === "error" ? "badge-danger" : "badge-warn"), d.severity));
      var a = el("a", "where", d.line + ":" + d.column);
      a.href = "#L" + d.line;
      a.setAttribute("data-column", d.column);
      a.title = "Go to line " + d.line;
      li.appendChild(a);
      var b = el("div", "diagnostic-body");
      if (d.path) b.appendChild(el("code", "path", d.path));
      var m = el("span", "message");
      messageInto(m, d.message);
      b.appendChild(m);
      li.appendChild(b);
      list.appendChild(li);
    });
  }

  // paintMirror draws, invisible, the lines that have a diagnostic, with
  // each diagnostic's range underlined (an error wins over a warning where
  // two overlap); the other lines are left empty, since only their height
  // places the marked ones. It writes nothing when the marked lines and
  // their ranges are what it drew last.
  var mirrorKey = "";
  function paintMirror(top, left) {
    var byLine = {}, nums = [];
    diags.forEach(function (d) {
      if (!byLine[d.line]) { byLine[d.line] = []; nums.push(d.line); }
      byLine[d.line].push(d);
    });
    nums.sort(function (a, b) { return a - b; });
    var lines = nums.length ? ta.value.split("\n") : [];
    nums = nums.filter(function (n) { return n >= 1 && n <= lines.length; });
    var key = nums.map(function (n) {
      return n + "\u0000" + lines[n - 1] + "\u0000" + byLine[n].map(function (d) { return d.severity + "," + d.column + "," + d.end_column; }).join(";");
    }).join("\u0001");
    if (key !== mirrorKey) {
      mirrorKey = key;
      var frag = document.createDocumentFragment();
      var line = 1;
      nums.forEach(function (n) {
        if (n > line) frag.appendChild(document.createTextNode("\n".repeat(n - line)));
        line = n;
        markLine(frag, lines[n - 1], byLine[n]);
      });
      mirrorLines.textContent = "";
      mirrorLines.appendChild(frag);
    }
    moveOverlay(top, left);
    if (!tip.hidden) hideTip();
  }
  // markLine appends a line's text with its diagnostics' ranges marked.
  function markLine(frag, text, ds) {
    var chars = Array.from(text);
    var marks = new Array(chars.length + 1);
    var beyond = "";
    ["warning", "error"].forEach(function (sev) {
      ds.forEach(function (d) {
        if (d.severity !== sev) return;
        var s = d.column - 1, e = Math.max(d.end_column - 1, d.column);
        if (s >= chars.length) { beyond = sev; return; }
        for (var k = s; k < Math.min(e, chars.length); k++) marks[k] = sev;
      });
    });
    for (var k = 0; k < chars.length;) {
      var j = k;
      while (j < chars.length && marks[j] === marks[k]) j++;
      var run = chars.slice(k, j).join("");
      if (marks[k]) frag.appendChild(el("span", "editor-mark editor-mark-" + marks[k], run));
      else frag.appendChild(document.createTextNode(run));
      k = j;
    }
    // A diagnostic past the end of its line (a missing key) marks the
    // place where the text would go.
    if (beyond) frag.appendChild(el("span", "editor-mark editor-mark-" + beyond + " editor-mark-eol", "  "));
  }

  function worst(ds) {
    return ds.some(function (d) { return d.severity === "error"; }) ? "error" : "warning";
  }
  function onLine(n) { return diags.filter(function (d) { return d.line === n; }); }

  // paintMarkers puts a marker beside each line with a diagnostic; it
  // writes nothing when the markers would be the ones already there.
  var markersKey = "";
  function paintMarkers() {
    var top = readMetrics().top, lh = readMetrics().lh;
    var key = top + "," + lh + "\u0001" + diags.map(function (d) { return d.line + "," + d.severity + "," + d.column + "," + d.message; }).join("\u0001");
    if (key === markersKey) return;
    markersKey = key;
    markers.textContent = "";
    var seen = {};
    diags.forEach(function (d) {
      if (seen[d.line]) return;
      seen[d.line] = true;
      var ds = onLine(d.line);
      var m = el("span", "editor-marker editor-marker-" + worst(ds));
      m.setAttribute("data-line", d.line);
      m.style.top = (top + (d.line - 1) * lh) + "px";
      m.style.height = lh + "px";
      m.title = ds.map(function (x) { return x.severity + ": " + x.message; }).join("\n");
      m.addEventListener("mouseenter", function () { showTip(ds, d.line); });
      m.addEventListener("mouseleave", hideTip);
      m.addEventListener("mousedown", function (ev) { ev.preventDefault(); gotoLine(d.line, d.column); });
      markers.appendChild(m);
    });
  }

  function showTip(ds, line, scrollTop) {
    if (!ds.length) { hideTip(); return; }
    tip.textContent = "";
    ds.forEach(function (d) {
      var row = el("div", "editor-tip-row");
      row.appendChild(el("span", "badge " + (d.severity === "error" ? "badge-danger" : "badge-warn"), d.severity));
      var m = el("span", "message");
      messageInto(m, d.message);
      row.appendChild(m);
      tip.appendChild(row);
    });
    placeTip(line, scrollTop);
  }
  // The tip goes below its line, or above it when there is no room below.
  // Its height is known once the browser has laid it out: a resize
  // observer hears it after the frame's layout, before its paint, so
  // placing a tip (after each answer) forces no layout of its own.
  var tipBelow = 0;
  function fitTip(h) {
    var top = tipBelow, lh = lineHeight();
    if (top + h > body.clientHeight && top - lh - h - 4 > 0) top = top - lh - h - 4;
    tip.style.top = top + "px";
  }
  var tipSized = window.ResizeObserver ? new ResizeObserver(function (entries) {
    if (tip.hidden) return;
    var box = entries[entries.length - 1].borderBoxSize;
    fitTip(box && box[0] ? box[0].blockSize : tip.offsetHeight);
  }) : null;
  function placeTip(line, scrollTop) {
    if (scrollTop === undefined) scrollTop = ta.scrollTop;
    tipBelow = readMetrics().top + line * lineHeight() - scrollTop + 2;
    tip.hidden = false;
    tip.style.top = tipBelow + "px";
    if (tipSized) {
      // A new observation reports the size at the next layout even when
      // it has not changed.
      tipSized.unobserve(tip);
      tipSized.observe(tip);
    } else {
      fitTip(tip.offsetHeight);
    }
    var desc = (ta.getAttribute("aria-describedby") || "").split(" ").filter(function (s) { return s && s !== tip.id; });
    desc.unshift(tip.id);
    ta.setAttribute("aria-describedby", desc.join(" "));
  }
  // showHelp shows a key's description from the reference, on hover.
  function showHelp(h, line) {
    tip.textContent = "";
    var row = el("div", "editor-tip-row");
    row.appendChild(el("code", "editor-tip-key", h.key));
    var m = el("span", "message");
    messageInto(m, h.doc);
    row.appendChild(m);
    tip.appendChild(row);
    placeTip(line);
  }
  function hideTip() {
    if (tip.hidden) return;
    tip.hidden = true;
    var desc = (ta.getAttribute("aria-describedby") || "").split(" ").filter(function (s) { return s && s !== tip.id; });
    if (desc.length) ta.setAttribute("aria-describedby", desc.join(" "));
    else ta.removeAttribute("aria-describedby");
  }

  // at returns the diagnostics whose range holds the character at line:col.
  function at(line, col) {
    return diags.filter(function (d) {
      if (d.line !== line) return false;
      var end = Math.max(d.end_column, d.column + 1);
      return col >= d.column && col < end || col === end && d.column >= end - 1;
    });
  }
  function caret() {
    var before = ta.value.slice(0, ta.selectionStart).split("\n");
    return { line: before.length, col: Array.from(before[before.length - 1]).length + 1 };
  }
  // The message of the range holding the caret is shown while the editor
  // has the keyboard focus, so it is there without a mouse.
  function showCaretTip(scrollTop) {
    if (typeof scrollTop !== "number") scrollTop = undefined; // called as a listener
    if (document.activeElement !== ta || !diags.length) { if (!hovering) hideTip(); return; }
    var c = caret();
    var ds = at(c.line, c.col);
    if (!ds.length && c.col > 1) ds = at(c.line, c.col - 1);
    if (ds.length) showTip(ds, c.line, scrollTop);
    else if (!hovering) hideTip();
  }
  ["keyup", "click", "focus"].forEach(function (t) { ta.addEventListener(t, showCaretTip); });
  ta.addEventListener("blur", function () { if (!hovering) hideTip(); });

  var hovering = false;
  var charWidth = 0;
  function measureChar() {
    var probe = el("span", "", "0000000000");
    mirror.appendChild(probe);
    charWidth = probe.getBoundingClientRect().width / 10;
    mirror.removeChild(probe);
    return charWidth;
  }
  ta.addEventListener("mousemove", function (ev) {
    if (!diags.length && !schema) return;
    var cs = getComputedStyle(ta), r = ta.getBoundingClientRect();
    var y = ev.clientY - r.top - (parseFloat(cs.paddingTop) || 0) - (parseFloat(cs.borderTopWidth) || 0) + ta.scrollTop;
    var x = ev.clientX - r.left - (parseFloat(cs.paddingLeft) || 0) - (parseFloat(cs.borderLeftWidth) || 0) + ta.scrollLeft;
    var line = Math.floor(y / lineHeight()) + 1;
    var col = Math.floor(x / (charWidth || measureChar() || 8)) + 1;
    var ds = x >= 0 ? at(line, col) : [];
    var help = !ds.length && x >= 0 && menu.hidden ? keyHelp(line, col) : null;
    if (ds.length) { hovering = true; showTip(ds, line); }
    else if (help) { hovering = true; showHelp(help, line); }
    else if (hovering) { hovering = false; showCaretTip(); }
  });
  ta.addEventListener("mouseleave", function () { if (hovering) { hovering = false; showCaretTip(); } });

  // The mirror takes the text area's font metrics, whatever the stylesheet
  // says, so the underlines stay under their characters.
  function matchMetrics() {
    var cs = getComputedStyle(ta);
    ["fontFamily", "fontSize", "fontWeight", "lineHeight", "letterSpacing", "tabSize",
      "paddingTop", "paddingRight", "paddingBottom", "paddingLeft",
      "borderTopWidth", "borderRightWidth", "borderBottomWidth", "borderLeftWidth"].forEach(function (p) {
      mirror.style[p] = cs[p];
    });
    charWidth = 0;
    metrics = null;
  }
  matchMetrics();
  window.addEventListener("resize", function () { matchMetrics(); paintMarkers(); });
  if (document.fonts && document.fonts.ready) document.fonts.ready.then(matchMetrics);

  // ---- Completion and help from the compiler's table (issue 26) ----
  // The keys, their descriptions and the allowed values come from the
  // JSON Schema the compiler generates from its own reference table
  // (/schema/skali.json), fetched once; nothing is a second copy.
  var schema = null, schemaAsked = false, lastKind = "";
  function wantSchema() {
    var k = request().kind || lastKind;
    if (k !== "skali" && !(k === "" && lastKind === "skali")) return null;
    if (!schemaAsked) {
      schemaAsked = true;
      fetch("/schema/skali.json", { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (s) { schema = s; })
        .catch(function () { /* no completion then */ });
    }
    return schema;
  }
  wantSchema();

  var keyLine = /^(\s*)(?:-\s+)?([A-Za-z0-9_.\/-]+)\s*:(?:\s+(.*?))?\s*$/;
  function indentOf(l) { return l.length - l.replace(/^\s+/, "").length; }
  // pathAt returns the keys of the blocks enclosing line i (0-based) for
  // text at the given indentation, outermost first.
  function pathAt(lines, i, indent) {
    var path = [];
    for (var j = i - 1; j >= 0 && indent > 0; j--) {
      var l = lines[j];
      if (/^\s*(#.*)?$/.test(l)) continue;
      var n = indentOf(l);
      if (n >= indent) continue;
      var m = keyLine.exec(l);
      if (!m || (m[3] && !/^(#.*)?$/.test(m[3]))) return null; // a value, a flow or a list: not a block key
      path.unshift(m[2]);
      indent = n;
    }
    return path;
  }
  function descend(s, path) {
    for (var i = 0; s && i < path.length; i++) {
      if (s.properties && s.properties[path[i]]) s = s.properties[path[i]];
      else if (s.additionalProperties && typeof s.additionalProperties === "object") s = s.additionalProperties;
      else return null;
    }
    return s;
  }
  function siblings(lines, i, indent) {
    var have = {};
    [-1, 1].forEach(function (dir) {
      for (var j = i + dir; j >= 0 && j < lines.length; j += dir) {
        var l = lines[j];
        if (/^\s*(#.*)?$/.test(l)) continue;
        var n = indentOf(l);
        if (n < indent) break;
        var m = n === indent && keyLine.exec(l);
        if (m) have[m[2]] = true;
      }
    });
    return have;
  }

  // suggestions returns what fits at the caret: keys (with their
  // descriptions) at a key position, allowed values after `key: `.
  function suggestions(explicit) {
    var s = wantSchema();
    if (!s || ta.selectionStart !== ta.selectionEnd) return null;
    var before = ta.value.slice(0, ta.selectionStart);
    var lines = ta.value.split("\n");
    var i = before.split("\n").length - 1;
    var head = lines[i].slice(0, before.length - before.lastIndexOf("\n") - 1);
    var m = /^(\s*)([A-Za-z0-9_]*)$/.exec(head);
    var items = [];
    if (m) {
      // A bare indentation offers keys only when asked (Ctrl+Space).
      if (!m[2] && !explicit) return null;
      var path = pathAt(lines, i, m[1].length);
      var at = path && descend(s, path);
      if (!at || !at.properties) return null;
      var have = siblings(lines, i, m[1].length);
      Object.keys(at.properties).forEach(function (k) {
        if (have[k] || k.indexOf(m[2]) !== 0) return;
        var p = at.properties[k];
        var block = p.type === "object";
        items.push({ label: k, detail: p.description || "", insert: k + (block ? ":\n" + m[1] + "  " : ": ") });
      });
      return items.length ? { from: ta.selectionStart - m[2].length, items: items } : null;
    }
    m = /^(\s*)(?:-\s+)?([A-Za-z0-9_]+):\s+([A-Za-z0-9_\/.-]*)$/.exec(head);
    if (!m) return null;
    var vpath = pathAt(lines, i, m[1].length);
    var v = vpath && descend(s, vpath.concat([m[2]]));
    if (!v) return null;
    var values = v.enum || v.examples || (v.type === "boolean" ? ["true", "false"] : null);
    if (!values) return null;
    values.forEach(function (x) {
      x = String(x);
      if (x.toLowerCase().indexOf(m[3].toLowerCase()) === 0 && x !== m[3]) items.push({ label: x, detail: "", insert: x });
    });
    return items.length ? { from: ta.selectionStart - m[3].length, items: items } : null;
  }

  var menu = document.createElement("ul");
  menu.className = "editor-complete";
  menu.id = ta.id + "-complete";
  menu.setAttribute("role", "listbox");
  menu.setAttribute("aria-label", "Suggestions");
  menu.hidden = true;
  body.appendChild(menu);
  var offer = null, active = 0;
  function closeMenu() {
    if (menu.hidden) return;
    menu.hidden = true;
    offer = null;
    ta.removeAttribute("aria-activedescendant");
  }
  function openMenu(o) {
    offer = o;
    active = 0;
    menu.textContent = "";
    o.items.forEach(function (it, k) {
      var li = el("li", "editor-complete-item");
      li.id = menu.id + "-" + k;
      li.setAttribute("role", "option");
      li.appendChild(el("code", "", it.label));
      if (it.detail) {
        var d = el("span", "editor-complete-detail");
        messageInto(d, it.detail);
        li.appendChild(d);
      }
      li.addEventListener("mousedown", function (ev) { ev.preventDefault(); accept(k); });
      menu.appendChild(li);
    });
    var before = ta.value.slice(0, ta.selectionStart).split("\n");
    var line = before.length, col = Array.from(before[line - 1]).length;
    var cs = getComputedStyle(ta);
    menu.style.top = ((parseFloat(cs.paddingTop) || 0) + line * lineHeight() - ta.scrollTop + 2) + "px";
    menu.style.left = Math.max(0, Math.min((parseFloat(cs.paddingLeft) || 0) + col * (charWidth || measureChar() || 8) - ta.scrollLeft, body.clientWidth - 260)) + "px";
    hideTip();
    menu.hidden = false;
    ta.setAttribute("aria-controls", menu.id);
    highlight();
  }
  function highlight() {
    Array.prototype.forEach.call(menu.children, function (li, k) { li.setAttribute("aria-selected", k === active ? "true" : "false"); });
    var li = menu.children[active];
    if (li) { ta.setAttribute("aria-activedescendant", li.id); li.scrollIntoView({ block: "nearest" }); }
  }
  function accept(k) {
    var it = offer && offer.items[k];
    if (!it) return;
    var from = offer.from;
    closeMenu();
    ta.focus();
    ta.setSelectionRange(from, ta.selectionStart);
    // insertText keeps the edit in the text area's undo history.
    if (!document.execCommand || !document.execCommand("insertText", false, it.insert)) {
      ta.setRangeText(it.insert, from, ta.selectionEnd, "end");
      ta.dispatchEvent(new Event("input", { bubbles: true }));
    }
  }
  function suggest(explicit) {
    var o = suggestions(explicit);
    if (o) openMenu(o); else closeMenu();
  }
  ta.addEventListener("input", function (ev) {
    if (ev.inputType && ev.inputType.indexOf("delete") === 0) { closeMenu(); return; }
    var ch = ta.value.charAt(ta.selectionStart - 1);
    if (/[A-Za-z0-9_ ]/.test(ch) || !menu.hidden) suggest(false);
  });
  ta.addEventListener("keydown", function (ev) {
    if (ev.key === " " && ev.ctrlKey) { ev.preventDefault(); suggest(true); return; }
    if (menu.hidden) return;
    if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      ev.preventDefault();
      var n = offer.items.length;
      active = (active + (ev.key === "ArrowDown" ? 1 : n - 1)) % n;
      highlight();
    } else if (ev.key === "Enter" || ev.key === "Tab") {
      ev.preventDefault();
      accept(active);
    } else if (ev.key === "Escape") {
      ev.preventDefault();
      closeMenu();
    }
  });
  ta.addEventListener("blur", closeMenu);
  ta.addEventListener("click", closeMenu);

  // keyHelp returns the description of the key under line:col, for hover.
  function keyHelp(line, col) {
    var s = wantSchema();
    if (!s) return null;
    var lines = ta.value.split("\n");
    var l = lines[line - 1];
    var m = l != null && keyLine.exec(l);
    if (!m) return null;
    var start = l.indexOf(m[2]) + 1;
    if (col < start || col >= start + m[2].length) return null;
    var path = pathAt(lines, line - 1, m[1].length);
    var k = path && descend(s, path.concat([m[2]]));
    if (!k || !k.description) return null;
    var parent = descend(s, path);
    if (!parent || !parent.properties || !parent.properties[m[2]]) return null;
    return { key: m[2], doc: k.description };
  }

  // A picked file fills the editor; the file field is then emptied so
  // that the text as edited is what gets sent.
  document.querySelectorAll("input[type=file][data-fill]").forEach(function (input) {
    input.addEventListener("change", function () {
      var file = input.files && input.files[0];
      if (!file) return;
      file.text().then(function (text) {
        ta.value = text;
        renumber();
        sync();
        input.value = "";
        schedule();
      });
    });
  });

  // A page that opens with text (after a post, or a revision to edit) is
  // checked at once.
  if (ta.value.trim() !== "") check();
})();

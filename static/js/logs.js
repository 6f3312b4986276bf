// Skali Studio: an application's runtime logs page follows new lines live.
// Progressive enhancement: without this script the page shows the lines
// as of its request. The list ol[data-follow] names the websocket
// (web/stream/logs.go) and data-after the newest line shown; each frame
// {"lines": [{"at", "datetime", "pod", "container", "text"}], "dropped": N}
// appends its lines (masked and made visible by the server; written here
// as text, never as HTML). A lost connection is retried with backoff,
// resuming after the last line shown. The list keeps at most MAX lines.
(function () {
  "use strict";
  var list = document.querySelector("ol[data-follow]");
  if (!list || !list.dataset.follow || !window.WebSocket) return;
  var MAX = 5000;
  var live = document.querySelector("[data-logs-live]");
  var liveText = document.querySelector("[data-logs-live-text]");
  var count = document.querySelector("[data-testid=logs-count]");
  var empty = document.querySelector("[data-logs-empty]");
  var after = list.dataset.after || "";
  var retry = 0;
  var added = 0;

  function status(on, text) {
    if (!live) return;
    live.hidden = false;
    live.classList.toggle("logs-live-off", !on);
    liveText.textContent = text;
  }

  function url() {
    var u = new URL(list.dataset.follow, window.location.href);
    u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
    if (after) u.searchParams.set("after", after);
    return u.toString();
  }

  function atBottom() {
    return list.scrollHeight - list.scrollTop - list.clientHeight < 40;
  }

  function line(l) {
    var li = document.createElement("li");
    li.className = "log-line";
    var t = document.createElement("time");
    t.className = "log-at";
    t.setAttribute("datetime", l.datetime);
    t.textContent = l.at;
    var src = document.createElement("span");
    src.className = "log-src";
    src.textContent = l.container ? l.pod + "/" + l.container : l.pod;
    src.title = src.textContent;
    var text = document.createElement("span");
    text.className = "log-text";
    text.textContent = l.text;
    li.appendChild(t);
    li.appendChild(src);
    li.appendChild(text);
    return li;
  }

  function append(frame) {
    var lines = frame.lines || [];
    if (!lines.length) return;
    var stick = atBottom();
    var frag = document.createDocumentFragment();
    lines.forEach(function (l) { frag.appendChild(line(l)); });
    list.appendChild(frag);
    while (list.childElementCount > MAX) list.removeChild(list.firstElementChild);
    after = lines[lines.length - 1].datetime;
    added += lines.length;
    if (empty) { empty.remove(); empty = null; }
    if (count) count.textContent = list.childElementCount + " lines, " + added + " new since the page was loaded.";
    if (stick) list.scrollTop = list.scrollHeight;
  }

  function connect() {
    var ws;
    try {
      ws = new WebSocket(url());
    } catch (e) {
      return;
    }
    ws.onopen = function () {
      retry = 0;
      status(true, "Following new lines live");
    };
    ws.onmessage = function (ev) {
      try {
        append(JSON.parse(ev.data));
      } catch (e) { /* a frame that does not parse is skipped */ }
    };
    ws.onclose = function (ev) {
      if (ev.code === 4403) {
        status(false, "Live updates stopped: you no longer have access to this environment.");
        return;
      }
      if (ev.code === 1011 && ev.reason) {
        status(false, "Live updates stopped: " + ev.reason);
        return;
      }
      var wait = Math.min(30000, 1000 * Math.pow(2, retry++)) * (0.5 + Math.random() / 2);
      status(false, "Live updates paused \u2014 reconnecting in " + Math.ceil(wait / 1000) + " s\u2026");
      setTimeout(connect, wait);
    };
  }
  list.scrollTop = list.scrollHeight;
  connect();
})();

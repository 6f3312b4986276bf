// Backups page: while an admin types a cron expression, show its next five
// fires in UTC (the server evaluates it; without JavaScript the preview
// shows after posting).
(function () {
  "use strict";
  var form = document.querySelector("form[data-preview]");
  if (!form) return;
  var input = form.querySelector("#cron");
  var box = form.querySelector("#schedule-preview");
  if (!input || !box) return;
  var timer = null;
  var seq = 0;

  function show(fires, problem) {
    var label = box.querySelector(".label");
    box.textContent = "";
    if (label) box.appendChild(label);
    if (problem) {
      var p = document.createElement("span");
      p.className = "subtle";
      p.setAttribute("data-testid", "preview-error");
      p.textContent = problem;
      box.appendChild(p);
      return;
    }
    var ol = document.createElement("ol");
    ol.className = "fire-list";
    ol.setAttribute("data-testid", "preview");
    fires.forEach(function (f) {
      var li = document.createElement("li");
      li.textContent = f;
      ol.appendChild(li);
    });
    box.appendChild(ol);
  }

  function update() {
    var expr = input.value.trim();
    if (!expr) {
      show(null, "Type an expression to see when it fires.");
      return;
    }
    var mine = ++seq;
    fetch(form.getAttribute("data-preview") + "?cron=" + encodeURIComponent(expr), {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
    })
      .then(function (r) { return r.json(); })
      .then(function (d) {
        if (mine !== seq) return;
        show(d.fires || [], d.error || "");
      })
      .catch(function () {});
  }

  input.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(update, 200);
  });
})();

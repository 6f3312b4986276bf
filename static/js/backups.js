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

  // A valid expression clears the error the last post left under the
  // field: it no longer describes what is typed.
  function clearFieldError() {
    var field = input.closest(".field-error");
    if (!field) return;
    field.classList.remove("field-error");
    input.removeAttribute("aria-invalid");
    var err = field.querySelector(".error-text");
    var hint = field.querySelector("[data-cron-hint]");
    if (err) err.remove();
    if (hint) {
      hint.id = "cron-help";
      hint.hidden = false;
    }
  }

  function show(fires, problem) {
    if (!problem) clearFieldError();
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

  // A page left open keeps its preview current: once the first fire
  // (written "Mon 2026-03-02 03:00", UTC) has come, ask again, so past
  // fires leave the list.
  function firstFire() {
    var li = box.querySelector(".fire-list li");
    var m = li && /(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2})/.exec(li.textContent);
    return m ? Date.parse(m[1] + "T" + m[2] + ":00Z") : null;
  }
  setInterval(function () {
    var at = firstFire();
    if (at !== null && at <= Date.now() && input.value.trim()) update();
  }, 5000);
})();

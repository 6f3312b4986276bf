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

// Backups page: it follows the environment's stream (live.js). When a
// snapshot or a restore starts or ends, or the environment's state changes,
// read the page again and swap the parts marked data-backups-live (status,
// snapshots, the header's action, the restore-failed callout). The schedule
// form is not among them: what an admin is typing stays.
(function () {
  "use strict";
  var page = document.querySelector(".backups-page[data-stream][data-refresh]");
  if (!page) return;
  var kinds = { backup: true, restore: true };
  var timer = null;
  var busy = false;
  var again = false;
  var skipped = false;
  var refreshed = 0; // shown in data-refreshed: how many times the page was read again

  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    // X-Studio-Refresh: the server keeps a one-time flash message for the
    // next page the person opens instead of spending it here.
    fetch(page.getAttribute("data-refresh"), {
      credentials: "same-origin",
      headers: { Accept: "text/html", "X-Studio-Refresh": "1" },
    })
      .then(function (r) {
        if (r.redirected) {
          // Signed out meanwhile: show where the server sends the person.
          location.reload();
          throw new Error("backups page: redirected");
        }
        if (!r.ok) throw new Error("backups page: " + r.status);
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-backups-live]").forEach(function (el) {
          // A part the person is using (focus in it, or text typed into
          // it) waits for the next refresh.
          if (el.contains(document.activeElement) || edited(el)) {
            skipped = true;
            return;
          }
          var fresh = el.id && doc.getElementById(el.id);
          if (fresh) el.replaceWith(document.importNode(fresh, true));
        });
        refreshed++;
        page.setAttribute("data-refreshed", String(refreshed));
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  function edited(el) {
    return Array.prototype.some.call(el.querySelectorAll("input, textarea"), function (i) {
      return i.type !== "hidden" && i.value !== i.defaultValue;
    });
  }

  // A part skipped while in use is read again once the person leaves it.
  page.addEventListener("focusout", function () {
    if (!skipped) return;
    skipped = false;
    clearTimeout(timer);
    timer = setTimeout(refresh, 300);
  });

  page.addEventListener("studio:event", function (e) {
    var f = e.detail || {};
    var concerned = (f.run && kinds[f.run.kind]) || f.type === "environment.state";
    if (!concerned) return;
    clearTimeout(timer);
    timer = setTimeout(refresh, 100);
  });
})();

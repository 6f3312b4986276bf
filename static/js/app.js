// Skali Studio: progressive enhancement only. Every page works without this
// script; live.js makes pages live (countdowns, run events as they land).
(function () {
  "use strict";

  // Countdowns and run events: see live.js.

  // Confirmation for destructive buttons: <button data-confirm="Delete X?">
  document.addEventListener("submit", function (ev) {
    var btn = ev.submitter;
    var msg = (btn && btn.getAttribute("data-confirm")) || ev.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) ev.preventDefault();
  });

  // A file picked for a manifest textarea fills it in.
  document.querySelectorAll("input[type=file][data-fill]").forEach(function (input) {
    input.addEventListener("change", function () {
      var target = document.getElementById(input.getAttribute("data-fill"));
      var file = input.files && input.files[0];
      if (!target || !file) return;
      file.text().then(function (text) { target.value = text; });
      // The file's name helps the Studio tell the manifest's kind.
      var name = document.getElementById(input.getAttribute("data-fill-name") || "");
      if (name) name.value = file.name;
    });
  });
})();

// Copy buttons: <button data-copy="element-id" hidden> copies that element's
// text; the button stays hidden without JavaScript (the text is selectable).
(function () {
  "use strict";
  document.querySelectorAll("button[data-copy]").forEach(function (btn) {
    var target = document.getElementById(btn.getAttribute("data-copy"));
    if (!target || !navigator.clipboard) return;
    btn.hidden = false;
    btn.addEventListener("click", function () {
      navigator.clipboard.writeText(target.textContent.trim()).then(function () {
        var label = btn.textContent;
        btn.textContent = "Copied";
        setTimeout(function () { btn.textContent = label; }, 1500);
      });
    });
  });
})();

// A pasted .env the Studio refused is kept in this browser, never sent
// back by the Studio (it holds secrets): <textarea data-keep-paste> is saved
// for this tab when its form is sent and put back when the page comes back
// with an error (aria-invalid); the copy is dropped either way.
(function () {
  "use strict";
  var area = document.querySelector("textarea[data-keep-paste]");
  if (!area || !window.sessionStorage) return;
  // By the form's address: the refused import's page is at that address.
  var key = "studio-paste:" + (area.form ? area.form.action : location.pathname) + ":" + area.name;
  var kept = null;
  try { kept = sessionStorage.getItem(key); sessionStorage.removeItem(key); } catch (e) { return; }
  if (kept && area.getAttribute("aria-invalid") === "true" && area.value === "") {
    area.value = kept;
    var note = document.querySelector("[data-paste-cleared]");
    if (note) note.textContent = "The pasted text is back from this browser (the Studio never sends values back): fix it and import again.";
  }
  if (area.form) {
    area.form.addEventListener("submit", function () {
      try { sessionStorage.setItem(key, area.value); } catch (e) { /* full or refused: nothing kept */ }
    });
  }
})();

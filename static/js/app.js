// Skali Studio: progressive enhancement only. Every page works without this
// script; it makes pages live (countdowns now, run events as they land).
(function () {
  "use strict";

  // Countdowns: <time data-countdown datetime="RFC3339">in 42 min</time>
  function formatRemaining(ms) {
    if (ms <= 0) return "any moment now";
    var s = Math.round(ms / 1000);
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    if (h > 0) return "in " + h + " h " + (m < 10 ? "0" : "") + m + " min";
    if (m > 0) return "in " + m + " min " + (sec < 10 ? "0" : "") + sec + " s";
    return "in " + sec + " s";
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("time[data-countdown]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("datetime"));
      if (!isNaN(at)) el.textContent = formatRemaining(at - now);
    });
  }
  if (document.querySelector("time[data-countdown]")) {
    tick();
    setInterval(tick, 1000);
  }

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

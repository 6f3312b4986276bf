// Skali Studio: the manifest editor, a progressive enhancement of the
// <textarea data-editor> of the validate, new-project and new-revision
// forms. It numbers the lines, and a diagnostic's line link (in the list of
// diagnostics or the verdict) puts the cursor on that line of the editor.
// Without this script the form posts the text or the picked file, and the
// line links lead to the annotated source listing.
(function () {
  "use strict";
  var ta = document.querySelector("textarea[data-editor]");
  if (!ta) return;

  var wrap = document.createElement("div");
  wrap.className = "editor";
  var gutter = document.createElement("div");
  gutter.className = "editor-gutter";
  gutter.setAttribute("aria-hidden", "true");
  ta.parentNode.insertBefore(wrap, ta);
  wrap.appendChild(gutter);
  wrap.appendChild(ta);
  // Numbers only line up with lines that do not wrap.
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
  function sync() { gutter.scrollTop = ta.scrollTop; }
  ta.addEventListener("input", function () { renumber(); sync(); });
  ta.addEventListener("scroll", sync);
  renumber();

  function gotoLine(n) {
    var lines = ta.value.split("\n");
    if (!(n >= 1 && n <= lines.length)) return false;
    var start = 0;
    for (var i = 0; i < n - 1; i++) start += lines[i].length + 1;
    ta.focus({ preventScroll: true });
    ta.setSelectionRange(start, start);
    var lineHeight = parseFloat(getComputedStyle(ta).lineHeight) || 20;
    ta.scrollTop = Math.max(0, (n - 4) * lineHeight);
    sync();
    wrap.scrollIntoView({ block: "center" });
    return true;
  }
  document.addEventListener("click", function (ev) {
    var a = ev.target.closest && ev.target.closest('a[href^="#L"]');
    // The source listing's own line numbers keep linking to its lines.
    if (!a || a.closest(".source")) return;
    if (gotoLine(parseInt(a.getAttribute("href").slice(2), 10))) ev.preventDefault();
  });

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
      });
    });
  });
})();

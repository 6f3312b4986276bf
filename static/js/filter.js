// Skali Studio: a filter box that hides the rows it does not match as one
// types. Without this script the box is a GET form that filters on the
// server. <input data-filter-rows="CSS selector of the rows"
// data-filter-count="id of the count"> matches each row's data-filter-text.
(function () {
  "use strict";
  document.querySelectorAll("input[data-filter-rows]").forEach(function (input) {
    var rows = document.querySelectorAll(input.getAttribute("data-filter-rows"));
    var count = document.getElementById(input.getAttribute("data-filter-count") || "");
    function apply() {
      var q = input.value.trim().toLowerCase();
      var shown = 0;
      rows.forEach(function (row) {
        var match = q === "" || (row.getAttribute("data-filter-text") || "").indexOf(q) !== -1;
        row.hidden = !match;
        if (match) shown++;
      });
      if (count) count.textContent = shown + " of " + rows.length;
    }
    input.addEventListener("input", apply);
  });
})();

// The admin's own script (templates/admin/base_site.html): a static file, so the Content-Security-Policy
// allows no inline script or event-handler attribute (#29).
(function () {
  "use strict";

  function selectText(el) {
    var range = document.createRange();
    range.selectNodeContents(el);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }

  // A "Copy" button after every value marked data-copy (e.g. a new API key, shown once).
  document.querySelectorAll("[data-copy]").forEach(function (el) {
    var button = document.createElement("button");
    button.type = "button";
    button.className = "copy-value";
    button.textContent = "Copy";
    button.addEventListener("click", function () {
      var text = el.textContent.trim();
      var done = function () { button.textContent = "Copied"; };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, function () { selectText(el); });
      } else {
        selectText(el);
        try { document.execCommand("copy"); done(); } catch (e) { button.textContent = "Press Ctrl-C"; }
      }
    });
    el.after(button);
  });

  // read-only inputs marked data-select-on-click select their whole value when clicked
  document.querySelectorAll("input[data-select-on-click]").forEach(function (input) {
    input.addEventListener("click", function () { input.select(); });
  });
})();

// The dashboard's only script: sizes that depend on the data. They are data attributes, set here through
// the DOM, because the Content-Security-Policy allows no style attribute (#29).
//   data-pct="42.5"        → style.width = 42.5%   (progress and fill bars)
//   data-max-width="860"   → style.maxWidth = 860px (charts drawn for that width)
(function () {
  "use strict";
  document.querySelectorAll("[data-pct]").forEach(function (el) {
    var pct = parseFloat(el.getAttribute("data-pct"));
    if (isFinite(pct)) el.style.width = Math.max(0, Math.min(100, pct)) + "%";
  });
  document.querySelectorAll("[data-max-width]").forEach(function (el) {
    var px = parseFloat(el.getAttribute("data-max-width"));
    if (isFinite(px)) el.style.maxWidth = px + "px";
  });
})();

// linkraft's web UI: small enhancements over pages that work without
// script. Loaded with defer; re-run on what htmx swaps in.
(function () {
  "use strict";

  function each(root, sel, fn) {
    if (root.matches && root.matches(sel)) fn(root);
    root.querySelectorAll(sel).forEach(fn);
  }

  // Copy buttons: data-copy names the input to copy.
  function copyButtons(root) {
    each(root, "[data-copy]", function (b) {
      b.addEventListener("click", function () {
        var src = document.querySelector(b.getAttribute("data-copy"));
        if (!src) return;
        var done = function () { b.textContent = "Copied"; setTimeout(function () { b.textContent = "Copy"; }, 1500); };
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(src.value).then(done, function () { src.select(); });
        } else {
          src.select();
          try { document.execCommand("copy"); done(); } catch (e) { /* the text stays selected */ }
        }
      });
    });
  }

  // Forms that destroy something ask first.
  function confirms(root) {
    each(root, "form[data-confirm]", function (f) {
      f.addEventListener("submit", function (e) {
        if (!window.confirm(f.getAttribute("data-confirm"))) { e.preventDefault(); e.stopImmediatePropagation(); }
      }, true);
    });
    each(root, "form#bulk", function (f) {
      f.addEventListener("submit", function (e) {
        var a = f.querySelector("[name=action]");
        if (a && a.value === "delete" && !window.confirm("Delete the selected links? Their codes will never be given out again.")) {
          e.preventDefault(); e.stopImmediatePropagation();
        }
      }, true);
    });
  }

  // The import's upload progress.
  function importProgress(root) {
    each(root, "form#import", function (f) {
      var bar = f.querySelector("progress");
      f.addEventListener("htmx:xhr:progress", function (e) {
        if (!bar || !e.detail.lengthComputable) return;
        bar.hidden = false;
        bar.value = Math.round(e.detail.loaded / e.detail.total * 100);
      });
    });
  }

  // The stats chart: clicks per interval, humans and bots, sized to its
  // box and redrawn when the window changes.
  function charts(root) {
    each(root, "#chart[data-series]", function (el) {
      if (typeof uPlot === "undefined" || el.dataset.drawn) return;
      el.dataset.drawn = "1";
      var s = JSON.parse(el.dataset.series);
      var dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
      var axis = { stroke: dark ? "#c2c7d0" : "#373c44", grid: { stroke: dark ? "#2a3140" : "#e7eaf0" } };
      var size = function () { return { width: Math.max(280, el.clientWidth), height: el.clientWidth < 500 ? 220 : 300 }; };
      var opts = Object.assign(size(), {
        series: [{}, { label: "Humans", stroke: "#0172ad", fill: "rgba(1,114,173,0.15)" }, { label: "Bots", stroke: "#d93526" }],
        axes: [axis, axis],
        scales: { y: { range: function (u, min, max) { return [0, Math.max(1, max)]; } } }
      });
      var plot = new uPlot(opts, [s.t, s.humans, s.bots], el);
      window.addEventListener("resize", function () { plot.setSize(size()); });
    });
  }

  function init(root) {
    copyButtons(root);
    confirms(root);
    importProgress(root);
    charts(root);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", function () { init(document); });
  else init(document);
  document.addEventListener("htmx:load", function (e) { if (e.target !== document.body) init(e.target); });
})();

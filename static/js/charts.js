// Draws each figure of the page's "figures" JSON (apps/dashboard/charts.py) into the element with its id.
// A file, not an inline script, so the Content-Security-Policy can forbid inline scripts.
(function () {
  const data = document.getElementById("figures");
  if (!data || typeof Plotly === "undefined") return;
  const figures = JSON.parse(data.textContent);
  for (const [id, fig] of Object.entries(figures)) {
    const el = document.getElementById(id);
    if (!el) continue;
    const config = Object.assign({displaylogo: false, responsive: true}, fig.config || {});
    Plotly.newPlot(el, fig.data, fig.layout, config);
  }
})();

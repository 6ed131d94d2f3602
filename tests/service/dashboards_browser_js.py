"""The JavaScript that test_dashboards_browser.py evaluates in its pages in Chromium."""

# Each labelled line of a chart: the label's rendered box and the line's rendered y (pixels).
LINES_JS = """
(el) => {
  const layout = el._fullLayout;
  const shapes = layout.shapes || [];
  return (layout.annotations || []).flatMap((a, i) => {
    const j = shapes.findIndex((s) => s.name && s.name === a.name);
    if (j < 0) return [];
    const label = el.querySelector(`.annotation[data-index="${i}"]`).getBoundingClientRect();
    const line = el.querySelector(`.shapelayer path[data-index="${j}"]`).getBoundingClientRect();
    const plot = el.querySelector('.nsewdrag').getBoundingClientRect();
    return [{text: a.text, labelTop: label.top, labelBottom: label.bottom, labelLeft: label.left,
             labelRight: label.right, lineY: line.top + line.height / 2, lineHeight: line.height,
             plotTop: plot.top, plotBottom: plot.bottom, plotLeft: plot.left, plotRight: plot.right}];
  });
}
"""

# Where the winner marker sits, and the heat map's value in that cell (null: no such cell).
WINNER_JS = """
(el) => {
  const heat = el._fullData.find((t) => t.type === 'heatmap');
  const marker = el._fullData.find((t) => t.name === 'winner');
  if (!heat || !marker) return null;
  const c = heat.x.map(String).indexOf(String(marker.x[0]));
  const r = heat.y.map(String).indexOf(String(marker.y[0]));
  return {markerX: String(marker.x[0]), markerY: String(marker.y[0]),
          cell: r >= 0 && c >= 0 ? heat.z[r][c] : null,
          drawn: el.querySelectorAll('.scatterlayer .point').length};
}
"""


# Resolves once no chart's texts have moved for 10 frames: plotly redraws a chart after its
# first pass to fit the margins to the labels (automargin), which moves everything in it.
SETTLED_JS = """
() => new Promise((resolve) => {
  const where = () => Array.from(document.querySelectorAll('.js-plotly-plot svg text'))
    .map((t) => { const b = t.getBoundingClientRect(); return `${b.left},${b.top}`; }).join(';');
  let last = where(), still = 0, frames = 0;
  const step = () => {
    const now = where();
    still = now === last ? still + 1 : 0;
    last = now;
    if (still >= 10 || ++frames > 600) resolve(frames); else requestAnimationFrame(step);
  };
  requestAnimationFrame(step);
})
"""

# Every non-empty text of a chart whose size as drawn (its font size times the scale of its
# transforms: plotly shrinks a bar label that does not fit by scaling it) is below the minimum.
SMALL_TEXT_JS = """
(el, minimum) => Array.from(el.querySelectorAll('svg text')).flatMap((t) => {
  const box = t.getBoundingClientRect();
  if (!t.textContent.trim() || box.width === 0) return [];
  const m = t.getScreenCTM();
  const size = parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
  return size < minimum ? [{text: t.textContent, size: size, cls: t.getAttribute('class')}] : [];
})
"""

# Pairs of heat-map numbers (the cells' texts) whose drawn boxes intersect.
HEATMAP_OVERLAP_JS = """
(el) => {
  const boxes = Array.from(el.querySelectorAll('.heatmaplayer text'))
    .filter((t) => t.textContent.trim())
    .map((t) => ({text: t.textContent, box: t.getBoundingClientRect()}));
  const hit = [];
  boxes.forEach((a, i) => boxes.slice(i + 1).forEach((b) => {
    const x = Math.min(a.box.right, b.box.right) - Math.max(a.box.left, b.box.left);
    const y = Math.min(a.box.bottom, b.box.bottom) - Math.max(a.box.top, b.box.top);
    if (x > 0.5 && y > 0.5 && hit.length < 5) hit.push([a.text, b.text]);
  }));
  return {labels: boxes.length, overlaps: hit};
}
"""

# The winners the overview's first chart names in its heat-map cells, with where they are drawn.
NAMED_WINNERS_JS = """
(el) => Array.from(el.querySelectorAll('.heatmaplayer text'))
  .filter((t) => t.textContent.trim())
  .map((t) => { const b = t.getBoundingClientRect();
                return {text: t.textContent.trim(), top: b.top, bottom: b.bottom}; })
"""

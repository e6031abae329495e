// The fleet drawn on one canvas: clusters (a disc sized by its count, a ring split by
// online status, the count inside) and single machines (a dot in the colour of their
// status, named once zoomed in). Built on Leaflet's Renderer, which keeps a canvas over
// the view and scales it during zoom animations. The marks are replaced wholesale on each
// poll: the API answers per cell of the view, so there are a few hundred at most, whatever
// the size of the fleet, and no object per machine lives in the page.
import { toneColour } from './format.js';

const DOT_RADIUS = 6;
const LABEL_FONT = '600 11px system-ui, -apple-system, "Segoe UI", sans-serif';
const COUNT_FONT = '700 12px system-ui, -apple-system, "Segoe UI", sans-serif';
/** Ring colours, in the order the ring is drawn (clockwise from the top). */
const RING = [
  ['online', toneColour.good],
  ['silent', toneColour.warn],
  ['offline', toneColour.bad],
  ['unknown', toneColour.muted],
  ['disabled', toneColour.muted],
];

/** 1,234 → "1.2k", 10,000 → "10k": a count that fits in a disc. */
function shortCount(n) {
  if (n < 1000) return String(n);
  if (n < 10_000) return `${(n / 1000).toFixed(1).replace(/\.0$/, '')}k`;
  return `${Math.round(n / 1000)}k`;
}

/** A cluster's radius: grows with the logarithm of its count, so 10,000 is not a hundred times 100. */
const clusterRadius = (count) => 13 + 4 * Math.log10(count);

/**
 * A mark is `{ latitude, longitude, count, tone, counts, label, device }`: count 1 is a
 * machine (tone: its status's colour name), more is a cluster (counts: per online status).
 */
export function createMachineLayer(L, options) {
  const MachineLayer = L.Renderer.extend({
    initialize(layerOptions) {
      L.Renderer.prototype.initialize.call(this, layerOptions);
      this._marks = [];
      this._drawn = [];
      this._labels = false;
    },

    _initContainer() {
      this._container = document.createElement('canvas');
      this._container.className = 'machine-canvas';
      this._ctx = this._container.getContext('2d');
    },

    _destroyContainer() {
      this._container.remove();
      delete this._ctx;
      delete this._container;
    },

    _update() {
      // Mid-animation the canvas is scaled by CSS; it is redrawn once the zoom settles.
      if (this._map._animatingZoom && this._bounds) return;
      L.Renderer.prototype._update.call(this);
      const bounds = this._bounds;
      const size = bounds.getSize();
      const ratio = window.devicePixelRatio || 1;
      L.DomUtil.setPosition(this._container, bounds.min);
      this._container.width = Math.round(size.x * ratio);
      this._container.height = Math.round(size.y * ratio);
      this._container.style.width = `${size.x}px`;
      this._container.style.height = `${size.y}px`;
      this._ctx.setTransform(ratio, 0, 0, ratio, -bounds.min.x * ratio, -bounds.min.y * ratio);
      this._draw();
    },

    /** Replaces what is drawn; `labels` names single machines. */
    setMarks(marks, { labels }) {
      this._marks = marks;
      this._labels = labels;
      if (this._ctx) this._draw();
    },

    /** The mark under a point of the map's container (the topmost), or null. */
    markAt(containerPoint) {
      const point = this._map.containerPointToLayerPoint(containerPoint);
      for (let index = this._drawn.length - 1; index >= 0; index -= 1) {
        const { x, y, r, mark } = this._drawn[index];
        if ((point.x - x) ** 2 + (point.y - y) ** 2 <= (r + 3) ** 2) return mark;
      }
      return null;
    },

    _draw() {
      const ctx = this._ctx;
      const { min, max } = this._bounds;
      ctx.clearRect(min.x, min.y, max.x - min.x, max.y - min.y);
      this._drawn = [];
      // Machines first, clusters over them, labels last so no disc hides a name.
      const machines = [];
      const clusters = [];
      for (const mark of this._marks) {
        const { x, y } = this._map.latLngToLayerPoint([mark.latitude, mark.longitude]);
        const placed = { x, y, r: mark.count === 1 ? DOT_RADIUS : clusterRadius(mark.count), mark };
        (mark.count === 1 ? machines : clusters).push(placed);
      }
      for (const placed of machines) drawMachine(ctx, placed);
      for (const placed of clusters) drawCluster(ctx, placed);
      if (this._labels) for (const placed of machines) drawLabel(ctx, placed);
      this._drawn = [...machines, ...clusters];
    },
  });
  return new MachineLayer(options);
}

function drawMachine(ctx, { x, y, r, mark }) {
  ctx.beginPath();
  ctx.arc(x, y, r, 0, Math.PI * 2);
  ctx.fillStyle = toneColour[mark.tone] ?? toneColour.muted;
  ctx.fill();
  ctx.lineWidth = 2;
  ctx.strokeStyle = '#ffffff';
  ctx.stroke();
}

function drawCluster(ctx, { x, y, r, mark }) {
  // The ring: one arc per online status, its length the status's share of the cluster.
  let angle = -Math.PI / 2;
  ctx.lineWidth = 5;
  for (const [status, colour] of RING) {
    const share = (mark.counts?.[status] ?? 0) / mark.count;
    if (share <= 0) continue;
    ctx.beginPath();
    ctx.arc(x, y, r - 2.5, angle, angle + share * Math.PI * 2);
    ctx.strokeStyle = colour;
    ctx.stroke();
    angle += share * Math.PI * 2;
  }
  ctx.beginPath();
  ctx.arc(x, y, r - 5, 0, Math.PI * 2);
  ctx.fillStyle = '#0d1b2a';
  ctx.fill();
  ctx.font = COUNT_FONT;
  ctx.textAlign = 'center';
  ctx.textBaseline = 'middle';
  ctx.fillStyle = '#ffffff';
  ctx.fillText(shortCount(mark.count), x, y + 0.5);
}

function drawLabel(ctx, { x, y, r, mark }) {
  if (!mark.label) return;
  ctx.font = LABEL_FONT;
  ctx.textAlign = 'left';
  ctx.textBaseline = 'middle';
  ctx.lineWidth = 3;
  ctx.strokeStyle = 'rgba(255, 255, 255, 0.92)';
  ctx.strokeText(mark.label, x + r + 4, y);
  ctx.fillStyle = '#1f2328';
  ctx.fillText(mark.label, x + r + 4, y);
}

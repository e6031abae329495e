// The fleet on a map. What the page asks for scales with the view, not the fleet: the
// machines in the box shown, counted per grid cell (GET /telemetry/devices/clusters) while
// many are in view, or the machines themselves (GET /telemetry/devices?bbox=…) once few
// are, redrawn on one canvas every few seconds so they move; the geofences as polygons;
// a paged, searchable list of the machines (the keyboard way to the map); and for the
// machine picked, highlighted on the map, its state, operator, today's usage sessions
// and trail of positions. There is no base map unless the deployment names a tile
// server: the yard is drawn from the API's own coordinates alone.
import { html, nothing, render } from '../vendor/lit-html.js';
import { debounce, get, poll } from './api.js';
import { ago, clock, count, duration, errorText, hours, km, onlineStatus, time, when, workState } from './format.js';
import { pager } from './pager.js';

const DEVICES_MS = 3000;
const LIST_MS = 5000;
const DETAIL_MS = 5000;
const TRAIL_MS = 15_000;
const ZONES_MS = 60_000;
const LIST_PAGE = 100;
const SEARCH_DELAY_MS = 300;
/** The machines themselves, rather than clusters, once fewer than this many (a page) are in view… */
const MAX_MACHINES = 500;
/** …and the map is zoomed in at least this far (a yard, not a country). */
const MACHINES_FROM_ZOOM = 15;
/** Names beside the machines from this zoom on. */
const LABELS_FROM_ZOOM = 16;
const TRAILS = {
  '1h': { label: '1 h', hours: 1 },
  '3h': { label: '3 h', hours: 3 },
  '12h': { label: '12 h', hours: 12 },
};

const tileUrl = document.querySelector('meta[name="gantry-tile-url"]')?.content;
const tileAttribution = document.querySelector('meta[name="gantry-tile-attribution"]')?.content ?? '';

function escapeHtml(text) {
  return String(text).replace(
    /[&<>"']/g,
    (char) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[char],
  );
}

const toneOf = (device) => onlineStatus[device.onlineStatus]?.tone ?? 'muted';
const labelOf = (device) => device.assetDisplayCode || device.assetName || device.deviceId;
const hasPosition = (device) => device.latitude !== null && device.longitude !== null;

/** GeoJSON rings ([lon, lat]) → Leaflet's [lat, lon]. */
function polygonsOf(geometry) {
  const polygons = geometry.type === 'MultiPolygon' ? geometry.coordinates : [geometry.coordinates];
  return polygons.map((polygon) => polygon.map((ring) => ring.map(([lon, lat]) => [lat, lon])));
}

/** GeoJSON's [minLon, minLat, maxLon, maxLat] → Leaflet's [[south, west], [north, east]]. */
const boundsOf = ([west, south, east, north]) => [
  [south, west],
  [north, east],
];

/** A machine of /telemetry/devices as the canvas draws it. */
const machineMark = (device) => ({
  latitude: device.latitude,
  longitude: device.longitude,
  count: 1,
  tone: toneOf(device),
  label: labelOf(device),
  device,
});

/** A cell of /telemetry/devices/clusters as the canvas draws it (a machine when it holds one). */
const cellMark = (cell) => ({
  latitude: cell.latitude,
  longitude: cell.longitude,
  count: cell.count,
  counts: cell.onlineStatusCounts,
  bbox: cell.bbox,
  tone: cell.device ? toneOf(cell.device) : 'muted',
  label: cell.device ? labelOf(cell.device) : '',
  device: cell.device,
});

function tally(devices) {
  const counts = {};
  for (const device of devices) counts[device.onlineStatus] = (counts[device.onlineStatus] ?? 0) + 1;
  return counts;
}

function sumCounts(cells) {
  const counts = {};
  for (const cell of cells)
    for (const [status, n] of Object.entries(cell.onlineStatusCounts)) counts[status] = (counts[status] ?? 0) + n;
  return counts;
}

export function fleetPage() {
  const element = document.createElement('section');
  element.setAttribute('aria-labelledby', 'fleet-title');
  const state = {
    /** What the map shows: clusters or machines, how many machines in view, by status. */
    view: { mode: 'clusters', total: null, counts: {}, marks: [] },
    list: { items: [], total: null, offset: 0, search: '', query: '', loaded: false },
    zones: [],
    error: null,
    updatedAt: null,
    selected: null,
    /** The machine picked, as /telemetry/devices lists it (refreshed with the map). */
    device: null,
    detail: null,
    sessions: null,
    trail: null,
    trailRange: '1h',
    detailError: null,
  };
  let L = null;
  let map = null;
  let machines = null;
  let highlight = null;
  let zoneLayer = null;
  let trailLayer = null;
  let fitted = false;
  const stops = [];
  let mapPoll = null;
  let listPoll = null;
  let detailStops = [];

  const draw = () => {
    render(view(state, actions), element);
  };

  let mapReady = null;
  /** Creates the map once, whichever poll asks first (two at once must not make two maps). */
  function ensureMap() {
    mapReady ??= createMap();
    return mapReady;
  }

  async function createMap() {
    L = await import('../vendor/leaflet.js');
    const { createMachineLayer } = await import('./machine-layer.js');
    const container = element.querySelector('.map');
    map = L.map(container, {
      zoomControl: true,
      attributionControl: Boolean(tileUrl),
      keyboard: true,
      minZoom: 2,
      maxZoom: 20,
      // One world: the view never crosses the antimeridian, so its box is one box.
      maxBounds: [
        [-90, -180],
        [90, 180],
      ],
      maxBoundsViscosity: 1,
    });
    map.setView([20, 0], 2);
    if (tileUrl) L.tileLayer(tileUrl, { attribution: escapeHtml(tileAttribution), maxZoom: 20 }).addTo(map);
    L.control.scale({ imperial: false }).addTo(map);
    zoneLayer = L.layerGroup().addTo(map);
    trailLayer = L.layerGroup().addTo(map);
    map.createPane('machines').classList.add('machines-pane');
    machines = createMachineLayer(L, { pane: 'machines' }).addTo(map);
    map.on('click', (event) => {
      const mark = machines.markAt(event.containerPoint);
      if (!mark) select(null);
      else if (mark.device) select(mark.device);
      else zoomInto(mark);
    });
    map.on('mousemove', (event) => {
      container.classList.toggle('map-over-mark', machines.markAt(event.containerPoint) !== null);
    });
    // A new view asks for its own marks at once.
    map.on(
      'moveend',
      debounce(() => mapPoll?.now(), 100),
    );
  }

  /** A cluster clicked: the map zooms in to the box around its machines. */
  function zoomInto(mark) {
    const [west, south, east, north] = mark.bbox;
    if (east - west < 1e-6 && north - south < 1e-6) map.setView([mark.latitude, mark.longitude], map.getZoom() + 3);
    else map.fitBounds(boundsOf(mark.bbox), { padding: [40, 40], maxZoom: 19 });
  }

  /** The box and zoom shown, widened to whole micro-degrees so no machine on an edge falls out. */
  function shownView() {
    const bounds = map.getBounds();
    const down = (value) => Math.floor(value * 1e6) / 1e6;
    const up = (value) => Math.ceil(value * 1e6) / 1e6;
    const west = Math.max(-180, down(bounds.getWest()));
    const south = Math.max(-90, down(bounds.getSouth()));
    const east = Math.min(180, up(bounds.getEast()));
    const north = Math.min(90, up(bounds.getNorth()));
    return { bbox: `${west},${south},${east},${north}`, zoom: Math.round(map.getZoom()) };
  }

  /**
   * Clusters while many machines are in view; the machines themselves once the view is
   * zoomed in and holds fewer than a page of them (the previous answer tells; a clusters
   * answer that finds few asks for the machines at once).
   */
  async function marksOf({ bbox, zoom }) {
    const few = (total) => zoom >= MACHINES_FROM_ZOOM && total !== null && total < MAX_MACHINES;
    let clustered = null;
    if (!few(state.view.total)) {
      const body = await get('/telemetry/devices/clusters', { bbox, zoom });
      clustered = {
        mode: 'clusters',
        total: body.total,
        counts: sumCounts(body.cells),
        marks: body.cells.map(cellMark),
      };
      if (!few(body.total)) return clustered;
    }
    const body = await get('/telemetry/devices', { bbox, limit: MAX_MACHINES });
    if (body.items.length < MAX_MACHINES)
      return {
        mode: 'machines',
        total: body.items.length,
        counts: tally(body.items),
        marks: body.items.map(machineMark),
      };
    // More than a page in view after all: clusters.
    state.view.total = null;
    return clustered ?? marksOf({ bbox, zoom });
  }

  function drawMarks() {
    machines.setMarks(state.view.marks, { labels: map.getZoom() >= LABELS_FROM_ZOOM });
    const container = element.querySelector('.map');
    const { total, mode, marks } = state.view;
    container.setAttribute(
      'aria-label',
      `Map of the fleet: ${count(total ?? 0)} machine${total === 1 ? '' : 's'} in view${
        mode === 'clusters' && marks.some((mark) => mark.count > 1) ? `, in ${count(marks.length)} groups` : ''
      }. Pick a machine in the list to see it here.`,
    );
    // What the canvas holds, for whoever checks it against the API (the tests do).
    container.dataset.mode = mode;
    container.dataset.shown = String(total ?? 0);
    container.dataset.marks = String(marks.length);
    drawHighlight();
  }

  /** The machine picked: a pin of its own over the canvas, focusable, named. */
  function drawHighlight() {
    const device = state.device;
    if (!device || !hasPosition(device)) {
      highlight?.remove();
      highlight = null;
      return;
    }
    const position = [device.latitude, device.longitude];
    const look = `${toneOf(device)}|${labelOf(device)}|${device.deviceId}`;
    if (!highlight || highlight.look !== look) {
      highlight?.remove();
      highlight = L.marker(position, {
        icon: L.divIcon({
          className: `pin pin-${toneOf(device)} pin-selected`,
          html: `<span class="pin-dot"></span><span class="pin-label">${escapeHtml(labelOf(device))}</span>`,
          iconSize: null,
          iconAnchor: [8, 8],
        }),
        keyboard: true,
        title: `${labelOf(device)}: ${onlineStatus[device.onlineStatus]?.label ?? device.onlineStatus} (selected)`,
        alt: labelOf(device),
        zIndexOffset: 1000,
      }).addTo(map);
      highlight.look = look;
      highlight.getElement()?.setAttribute('data-device-id', device.deviceId);
    } else {
      highlight.setLatLng(position);
    }
    const pin = highlight.getElement();
    if (pin) {
      pin.dataset.lat = String(device.latitude);
      pin.dataset.lon = String(device.longitude);
    }
  }

  function drawZones() {
    zoneLayer.clearLayers();
    for (const zone of state.zones) {
      if (!['Polygon', 'MultiPolygon'].includes(zone.geometry.type)) continue;
      const forbidden = zone.type === 'forbidden';
      L.polygon(polygonsOf(zone.geometry), {
        className: `zone zone-${zone.type}${zone.enabled ? '' : ' zone-disabled'}`,
        color: forbidden ? '#cf222e' : '#0969da',
        weight: 2,
        dashArray: forbidden ? '6 4' : null,
        fillOpacity: forbidden ? 0.12 : 0.06,
        interactive: false,
      })
        .bindTooltip(
          `${zone.name}${zone.activeAlertCount ? ` · ${zone.activeAlertCount} active alert${zone.activeAlertCount > 1 ? 's' : ''}` : ''}`,
          {
            permanent: true,
            direction: 'center',
            className: `zone-label zone-label-${zone.type}`,
          },
        )
        .addTo(zoneLayer);
    }
  }

  /**
   * Frames every machine with a position (the box around them, from one clusters answer
   * for the whole world), or, before any has one, the zones.
   */
  async function fit() {
    const world = await get('/telemetry/devices/clusters', { zoom: 0 });
    if (world.extent) {
      map.fitBounds(boundsOf(world.extent), { padding: [48, 48], maxZoom: 18, animate: false });
      return true;
    }
    const points = [];
    for (const zone of state.zones) for (const polygon of polygonsOf(zone.geometry)) points.push(...polygon[0]);
    if (points.length === 0) return false;
    map.fitBounds(L.latLngBounds(points), { padding: [48, 48], maxZoom: 18, animate: false });
    return true;
  }

  function drawTrail() {
    trailLayer.clearLayers();
    const device = state.device;
    if (!device || !state.trail) return;
    const points = state.trail.items.map((item) => [item.latitude, item.longitude]);
    if (hasPosition(device)) points.push([device.latitude, device.longitude]);
    if (points.length < 2) return;
    L.polyline(points, { color: '#0550ae', weight: 3, opacity: 0.85, className: 'trail', interactive: false }).addTo(
      trailLayer,
    );
    L.circleMarker(points[0], { radius: 4, color: '#0550ae', fillColor: '#fff', fillOpacity: 1, weight: 2 }).addTo(
      trailLayer,
    );
  }

  /** The machine picked, as the list has it now: its position moves the highlight. */
  async function refreshSelected() {
    const id = state.selected;
    const body = await get('/telemetry/devices', { assetId: state.device.assetId, limit: 100 });
    if (state.selected !== id) return;
    state.device = body.items.find((device) => device.id === id) ?? state.device;
  }

  async function loadMap() {
    await ensureMap();
    try {
      if (!fitted) fitted = await fit();
      const [marks] = await Promise.all([marksOf(shownView()), state.selected ? refreshSelected() : undefined]);
      state.view = marks;
      state.error = null;
      state.updatedAt = Date.now();
    } catch (error) {
      state.error = error;
    }
    drawMarks();
    if (state.selected) drawTrail();
    draw();
  }

  /** The query of the list as shown now. */
  const listQuery = () => ({ q: state.list.query, limit: LIST_PAGE, offset: state.list.offset, total: true });

  async function loadList() {
    // The detail panel takes the list's place while a machine is picked.
    if (state.selected && state.list.loaded) return;
    const asked = listQuery();
    try {
      const body = await get('/telemetry/devices', asked);
      if (JSON.stringify(asked) !== JSON.stringify(listQuery())) return;
      Object.assign(state.list, { items: body.items, total: body.paging.total, loaded: true });
    } catch (error) {
      state.error = error;
    }
    draw();
  }

  async function loadZones() {
    try {
      state.zones = (await get('/telemetry/geofences')).items;
    } catch (error) {
      state.error = error;
    }
    await ensureMap();
    drawZones();
  }

  async function loadDetail() {
    const device = state.device;
    if (!device) return;
    try {
      state.detail = await get(`/telemetry/assets/${device.assetId}/state`);
      state.detailError = null;
    } catch (error) {
      state.detailError = error;
    }
    draw();
  }

  async function loadSessions() {
    const device = state.device;
    if (!device) return;
    const midnight = new Date();
    midnight.setHours(0, 0, 0, 0);
    try {
      state.sessions = await get('/telemetry/usage-sessions', {
        assetId: device.assetId,
        from: midnight.toISOString(),
        to: new Date(Date.now() + 60_000).toISOString(),
        limit: 100,
      });
    } catch (error) {
      state.detailError = error;
    }
    draw();
  }

  async function loadTrail() {
    const device = state.device;
    if (!device) return;
    const range = TRAILS[state.trailRange];
    try {
      state.trail = await get(`/telemetry/assets/${device.assetId}/positions`, {
        from: new Date(Date.now() - range.hours * 3_600_000).toISOString(),
        to: new Date(Date.now() + 60_000).toISOString(),
        resolution: range.hours > 3 ? '15min' : '1min',
        limit: 500,
      });
    } catch (error) {
      state.detailError = error;
    }
    draw();
    drawTrail();
  }

  function stopDetail() {
    for (const stop of detailStops) stop();
    detailStops = [];
  }

  /**
   * Picks a machine (`device`: a row of /telemetry/devices, or the device of a map cell,
   * which the next refresh completes) or, with null, goes back to the list.
   */
  function select(device) {
    if (state.selected === (device?.id ?? null)) return;
    stopDetail();
    Object.assign(state, {
      selected: device?.id ?? null,
      device,
      detail: null,
      sessions: null,
      trail: null,
      detailError: null,
    });
    draw();
    if (map) {
      drawHighlight();
      trailLayer.clearLayers();
    }
    if (!device) {
      listPoll?.now();
      return;
    }
    // Brought into view only when it is out of it: the rest of the fleet stays where it was.
    if (hasPosition(device) && map && !map.getBounds().contains([device.latitude, device.longitude]))
      map.panTo([device.latitude, device.longitude]);
    detailStops = [poll(loadDetail, DETAIL_MS), poll(loadSessions, 30_000), poll(loadTrail, TRAIL_MS)];
    mapPoll?.now();
    element.querySelector('.detail h2')?.focus();
  }

  const searchLater = debounce(() => {
    state.list.query = state.list.search.trim();
    state.list.offset = 0;
    listPoll?.now();
  }, SEARCH_DELAY_MS);

  const actions = {
    select,
    search(value) {
      state.list.search = value;
      draw();
      searchLater();
    },
    page(offset) {
      state.list.offset = offset;
      listPoll?.now();
    },
    trailRange(value) {
      state.trailRange = value;
      state.trail = null;
      draw();
      void loadTrail();
    },
    recentre() {
      if (map)
        void fit().catch((error) => {
          state.error = error;
          draw();
        });
    },
  };

  draw();
  return {
    element,
    start() {
      mapPoll = poll(loadMap, DEVICES_MS);
      listPoll = poll(loadList, LIST_MS);
      stops.push(mapPoll, listPoll, poll(loadZones, ZONES_MS));
      if (state.device) {
        const device = state.device;
        state.selected = null;
        select(device);
      }
      requestAnimationFrame(() => map?.invalidateSize());
    },
    stop() {
      for (const stop of stops.splice(0)) stop();
      mapPoll = null;
      listPoll = null;
      stopDetail();
    },
  };
}

function legend() {
  return html`<ul class="legend" aria-label="Legend">
    ${Object.entries(onlineStatus).map(
      ([, status]) =>
        html`<li><span class="swatch swatch-${status.tone}" aria-hidden="true"></span>${status.label}</li>`,
    )}
    <li><span class="swatch swatch-cluster" aria-hidden="true"></span>Group of machines (click to zoom in)</li>
    <li><span class="swatch swatch-zone-forbidden" aria-hidden="true"></span>Forbidden zone</li>
    <li><span class="swatch swatch-zone-allowed" aria-hidden="true"></span>Allowed zone</li>
  </ul>`;
}

function statusBadge(device) {
  const status = onlineStatus[device.onlineStatus] ?? { label: device.onlineStatus, tone: 'muted' };
  return html`<span class="badge badge-${status.tone}">${status.label}</span>`;
}

function deviceList(state, actions) {
  const { list } = state;
  return html`<div class="panel-head">
      <h2 id="fleet-list">Machines <span class="muted">${list.loaded && !list.query ? count(list.total) : nothing}</span></h2>
      <label class="search"><span class="visually-hidden">Search machines</span>
        <input type="search" placeholder="Search machine, identifier or device" .value=${list.search}
          @input=${(event) => actions.search(event.target.value)}></label>
      ${list.loaded ? pager({ offset: list.offset, limit: LIST_PAGE, total: list.total, shown: list.items.length, noun: list.query ? 'matching' : 'machines', go: actions.page }) : nothing}
    </div>
    <ul class="device-list" aria-labelledby="fleet-list">
      ${list.items.map(
        (device) => html`<li>
          <button type="button" class="device-row" data-device-id=${device.deviceId} @click=${() => actions.select(device)}>
            <span class="dot dot-${onlineStatus[device.onlineStatus]?.tone ?? 'muted'}" aria-hidden="true"></span>
            <span class="device-main">
              <span class="strong">${device.assetName}</span>
              <span class="sub">${device.deviceId}${device.lastIdentifier ? ` · ${device.lastIdentifier}` : ''}</span>
            </span>
            <span class="device-side">
              <span class="small">${workState[device.workState] ?? device.workState}</span>
              <span class="sub">${hasPosition(device) ? ago(device.lastSeenAt) : 'no position'}</span>
            </span>
          </button>
        </li>`,
      )}
      ${list.items.length === 0 ? html`<li class="empty">${list.loaded ? 'No machine matches.' : 'Loading…'}</li>` : nothing}
    </ul>`;
}

function fact(label, value) {
  return html`<div><dt>${label}</dt><dd>${value}</dd></div>`;
}

function detailPanel(state, actions) {
  const device = state.device;
  if (!device) return nothing;
  const s = state.detail?.state ?? null;
  const position = s?.position;
  return html`<div class="detail">
    <button type="button" class="button ghost back" @click=${() => actions.select(null)}>← All machines</button>
    <h2 tabindex="-1">${device.assetName}</h2>
    <p class="sub">${device.assetIdentifier} · <code>${device.deviceId}</code></p>
    <p>${statusBadge(device)} <span class="badge badge-info">${workState[device.workState] ?? device.workState}</span></p>
    ${state.detailError ? html`<p class="banner banner-bad" role="alert">${errorText(state.detailError)}</p>` : nothing}
    ${
      !s
        ? html`<p class="loading" role="status">Loading state…</p>`
        : html`
      <section aria-labelledby="detail-operator" class="operator">
        <h3 id="detail-operator">Operator</h3>
        ${
          s.identifier && s.identifierEvent !== 'logout'
            ? html`<p><span class="strong">${s.operatorName || 'Unregistered identifier'}</span>
                <span class="sub">${s.identifier} · since ${time(s.identifierTs)}</span></p>`
            : html`<p class="muted">Nobody logged in</p>`
        }
      </section>
      <dl class="facts">
        ${fact('Last message', html`<span title=${when(s.lastMessageAt)}>${ago(s.lastMessageAt)}</span>`)}
        ${fact('Ignition', s.ignition === null || s.ignition === undefined ? '—' : s.ignition ? 'On' : 'Off')}
        ${fact('Speed', position?.speedKmh === null || position?.speedKmh === undefined ? '—' : `${Math.round(position.speedKmh)} km/h`)}
        ${fact('Spreader', s.spreaderLocked === null || s.spreaderLocked === undefined ? '—' : s.spreaderLocked ? 'Locked (loaded)' : 'Open')}
        ${fact('Hourmeter', s.hourmeterValue === null || s.hourmeterValue === undefined ? '—' : hours(s.hourmeterValue))}
        ${fact('Battery', s.heartbeat?.batteryV ? `${s.heartbeat.batteryV.toFixed(1)} V` : '—')}
        ${fact('Position', position ? `${position.latitude.toFixed(5)}, ${position.longitude.toFixed(5)}` : '—')}
        ${fact('In zones', s.geofences?.length ? s.geofences.map((zone) => zone.name).join(', ') : 'none')}
      </dl>`
    }
    <section aria-labelledby="detail-sessions">
      <h3 id="detail-sessions">Today’s usage</h3>
      ${
        !state.sessions
          ? html`<p class="loading">Loading sessions…</p>`
          : state.sessions.items.length === 0
            ? html`<p class="muted">No usage session today.</p>`
            : html`<ol class="sessions">${state.sessions.items.map(
                (session) => html`<li>
                  <div class="session-head">
                    <span class="strong">${clock(session.startTs)} – ${session.endReason === 'ongoing' ? 'now' : clock(session.endTs)}</span>
                    <span>${duration(session.durationSeconds)}</span>
                  </div>
                  <div class="sub">${session.operatorName || session.identifier || 'no operator'} · ${km(session.distanceM)} ·
                    ${count(session.containerWork.containerCycleCount)} container cycles</div>
                </li>`,
              )}</ol>`
      }
    </section>
    <section aria-labelledby="detail-trail">
      <h3 id="detail-trail">Trail</h3>
      <div class="segmented" role="group" aria-label="Trail length">
        ${Object.entries(TRAILS).map(
          ([
            id,
            range,
          ]) => html`<button type="button" aria-pressed=${state.trailRange === id} @click=${() => actions.trailRange(id)}>
            Last ${range.label}</button>`,
        )}
      </div>
      <p class="muted small">${
        state.trail
          ? `${count(state.trail.items.length)} positions (${state.trail.resolution} buckets), drawn on the map`
          : 'Loading positions…'
      }</p>
    </section>
  </div>`;
}

/** " · 9,876 in view (9,500 online, 376 silent)": what the map shows, by status. */
function inView({ total, counts }) {
  if (total === null) return '';
  const parts = Object.entries(counts)
    .filter(([, n]) => n > 0)
    .map(([status, n]) => `${count(n)} ${onlineStatus[status]?.label.toLowerCase() ?? status}`);
  return ` · ${count(total)} in view${parts.length ? ` (${parts.join(', ')})` : ''}`;
}

function view(state, actions) {
  return html`<div class="page-head">
      <div>
        <h1 id="fleet-title">Fleet</h1>
        <p class="muted">Last known positions${inView(state.view)}${state.updatedAt ? html` · updated ${time(state.updatedAt)}` : nothing} · moves live every ${DEVICES_MS / 1000} s</p>
      </div>
      <div class="controls">
        <button type="button" class="button" @click=${actions.recentre}>Fit to fleet</button>
      </div>
    </div>
    ${state.error ? html`<p class="banner banner-bad" role="alert">Could not refresh: ${errorText(state.error)}</p>` : nothing}
    <div class="fleet">
      <div class="map-wrap">
        <div class="map ${tileUrl ? 'map-tiles' : 'map-plain'}" role="region" aria-label="Map of the fleet"></div>
        ${legend()}
      </div>
      <aside class="panel" aria-label="Machines">
        ${state.selected ? detailPanel(state, actions) : deviceList(state, actions)}
      </aside>
    </div>`;
}

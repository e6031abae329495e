// The fleet on a map: every device at its last position (GET /telemetry/devices, polled
// every few seconds so the machines move), the geofences as polygons, and for the device
// picked its state, operator, today's usage sessions and trail of positions. There is no
// base map unless the deployment names a tile server: the yard is drawn from the API's
// own coordinates alone.
import { html, nothing, render } from '../vendor/lit-html.js';
import { get, getAll, poll } from './api.js';
import { ago, clock, count, duration, errorText, hours, km, onlineStatus, time, when, workState } from './format.js';

const DEVICES_MS = 3000;
const DETAIL_MS = 5000;
const TRAIL_MS = 15_000;
const ZONES_MS = 60_000;
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

export function fleetPage() {
  const element = document.createElement('section');
  element.setAttribute('aria-labelledby', 'fleet-title');
  const state = {
    devices: [],
    zones: [],
    loaded: false,
    error: null,
    updatedAt: null,
    selected: null,
    detail: null,
    sessions: null,
    trail: null,
    trailRange: '1h',
    detailError: null,
    search: '',
  };
  let L = null;
  let map = null;
  let fitted = false;
  const markers = new Map();
  let zoneLayer = null;
  let trailLayer = null;
  const stops = [];
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
    const container = element.querySelector('.map');
    map = L.map(container, { zoomControl: true, attributionControl: Boolean(tileUrl), keyboard: true, maxZoom: 20 });
    map.setView([0, 0], 2);
    if (tileUrl) L.tileLayer(tileUrl, { attribution: escapeHtml(tileAttribution), maxZoom: 20 }).addTo(map);
    L.control.scale({ imperial: false }).addTo(map);
    zoneLayer = L.layerGroup().addTo(map);
    trailLayer = L.layerGroup().addTo(map);
    map.on('click', () => select(null));
    // Names next to every pin only once zoomed in enough for them not to pile up.
    const labelsByZoom = () => container.classList.toggle('map-labels', map.getZoom() >= 16);
    map.on('zoomend', labelsByZoom);
    labelsByZoom();
  }

  function pinIcon(device) {
    const selected = state.selected === device.id;
    return L.divIcon({
      className: `pin pin-${toneOf(device)}${selected ? ' pin-selected' : ''}`,
      html: `<span class="pin-dot"></span><span class="pin-label">${escapeHtml(labelOf(device))}</span>`,
      iconSize: null,
      iconAnchor: [8, 8],
    });
  }

  function drawMarkers() {
    const seen = new Set();
    for (const device of state.devices) {
      if (!hasPosition(device)) continue;
      seen.add(device.id);
      const position = [device.latitude, device.longitude];
      let entry = markers.get(device.id);
      const look = `${toneOf(device)}|${state.selected === device.id}|${labelOf(device)}`;
      if (!entry) {
        const marker = L.marker(position, {
          icon: pinIcon(device),
          keyboard: true,
          title: `${labelOf(device)}: ${onlineStatus[device.onlineStatus]?.label ?? device.onlineStatus}`,
          alt: labelOf(device),
          riseOnHover: true,
        }).addTo(map);
        marker.on('click', () => select(device.id));
        entry = { marker, look };
        markers.set(device.id, entry);
        marker.getElement()?.setAttribute('data-device-id', device.deviceId);
      } else {
        entry.marker.setLatLng(position);
        if (entry.look !== look) {
          entry.marker.setIcon(pinIcon(device));
          entry.marker.getElement()?.setAttribute('data-device-id', device.deviceId);
          entry.look = look;
        }
      }
      entry.marker.setZIndexOffset(state.selected === device.id ? 1000 : 0);
      const element = entry.marker.getElement();
      if (element) element.dataset.lat = String(device.latitude);
    }
    for (const [id, entry] of markers) {
      if (!seen.has(id)) {
        entry.marker.remove();
        markers.delete(id);
      }
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

  /** Frames the machines (or, before any has a position, the zones). */
  function fit() {
    const points = state.devices.filter(hasPosition).map((device) => [device.latitude, device.longitude]);
    if (points.length === 0)
      for (const zone of state.zones) for (const polygon of polygonsOf(zone.geometry)) points.push(...polygon[0]);
    if (points.length === 0) return false;
    map.fitBounds(L.latLngBounds(points), { padding: [48, 48], maxZoom: 18 });
    return true;
  }

  function drawTrail() {
    trailLayer.clearLayers();
    const device = state.devices.find((candidate) => candidate.id === state.selected);
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

  async function loadDevices() {
    try {
      const body = await getAll('/telemetry/devices');
      state.devices = body.items;
      state.error = null;
      state.updatedAt = Date.now();
      state.loaded = true;
    } catch (error) {
      state.error = error;
    }
    draw();
    await ensureMap();
    drawMarkers();
    if (!fitted) fitted = fit();
    if (state.selected) drawTrail();
  }

  async function loadZones() {
    try {
      state.zones = (await get('/telemetry/geofences')).items;
    } catch (error) {
      state.error = error;
    }
    await ensureMap();
    drawZones();
    if (!fitted && state.loaded) fitted = fit();
  }

  const selectedDevice = () => state.devices.find((device) => device.id === state.selected);

  async function loadDetail() {
    const device = selectedDevice();
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
    const device = selectedDevice();
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
    const device = selectedDevice();
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

  function select(id) {
    if (state.selected === id) return;
    stopDetail();
    Object.assign(state, { selected: id, detail: null, sessions: null, trail: null, detailError: null });
    draw();
    if (map) {
      drawMarkers();
      trailLayer.clearLayers();
    }
    if (!id) return;
    const device = selectedDevice();
    // Brought into view only when it is out of it: the rest of the fleet stays where it was.
    if (device && hasPosition(device) && map && !map.getBounds().contains([device.latitude, device.longitude]))
      map.panTo([device.latitude, device.longitude]);
    detailStops = [poll(loadDetail, DETAIL_MS), poll(loadSessions, 30_000), poll(loadTrail, TRAIL_MS)];
    element.querySelector('.detail h2')?.focus();
  }

  const actions = {
    select,
    search(value) {
      state.search = value;
      draw();
    },
    trailRange(value) {
      state.trailRange = value;
      state.trail = null;
      draw();
      void loadTrail();
    },
    recentre() {
      if (map) fit();
    },
  };

  draw();
  return {
    element,
    start() {
      stops.push(poll(loadDevices, DEVICES_MS), poll(loadZones, ZONES_MS));
      if (state.selected) select(state.selected);
      requestAnimationFrame(() => map?.invalidateSize());
    },
    stop() {
      for (const stop of stops.splice(0)) stop();
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
    <li><span class="swatch swatch-zone-forbidden" aria-hidden="true"></span>Forbidden zone</li>
    <li><span class="swatch swatch-zone-allowed" aria-hidden="true"></span>Allowed zone</li>
  </ul>`;
}

function statusBadge(device) {
  const status = onlineStatus[device.onlineStatus] ?? { label: device.onlineStatus, tone: 'muted' };
  return html`<span class="badge badge-${status.tone}">${status.label}</span>`;
}

function deviceList(state, actions) {
  const search = state.search.trim().toLowerCase();
  const devices = state.devices.filter(
    (device) =>
      !search ||
      [device.assetName, device.assetDisplayCode, device.deviceId, device.lastIdentifier].some((text) =>
        text?.toLowerCase().includes(search),
      ),
  );
  const counts = {};
  for (const device of state.devices) counts[device.onlineStatus] = (counts[device.onlineStatus] ?? 0) + 1;
  return html`<div class="panel-head">
      <h2 id="fleet-list">Machines <span class="muted">${state.devices.length}</span></h2>
      <p class="muted small">${Object.entries(counts)
        .map(([status, n]) => `${n} ${onlineStatus[status]?.label.toLowerCase() ?? status}`)
        .join(' · ')}</p>
      <label class="search"><span class="visually-hidden">Search machines</span>
        <input type="search" placeholder="Search machine, device or operator" .value=${state.search}
          @input=${(event) => actions.search(event.target.value)}></label>
    </div>
    <ul class="device-list" aria-labelledby="fleet-list">
      ${devices.map(
        (device) => html`<li>
          <button type="button" class="device-row" data-device-id=${device.deviceId} @click=${() => actions.select(device.id)}>
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
      ${devices.length === 0 ? html`<li class="empty">${state.loaded ? 'No machine matches.' : 'Loading…'}</li>` : nothing}
    </ul>`;
}

function fact(label, value) {
  return html`<div><dt>${label}</dt><dd>${value}</dd></div>`;
}

function detailPanel(state, actions) {
  const device = state.devices.find((candidate) => candidate.id === state.selected);
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

function view(state, actions) {
  return html`<div class="page-head">
      <div>
        <h1 id="fleet-title">Fleet</h1>
        <p class="muted">Last known positions${state.updatedAt ? html` · updated ${time(state.updatedAt)}` : nothing} · moves live every ${DEVICES_MS / 1000} s</p>
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

// Data quality (GET /telemetry/data-quality): summary tiles, one row per device, the
// message types and the latest errors with their payloads, refreshed every few seconds.
import { html, nothing, render } from '../vendor/lit-html.js';
import { get, poll } from './api.js';
import { ago, count, errorText, percent, qualityTone, time, when } from './format.js';

const REFRESH_MS = 5000;

export function qualityPage() {
  const element = document.createElement('section');
  element.setAttribute('aria-labelledby', 'quality-title');
  const state = { data: null, error: null, filter: 'all', search: '', updatedAt: null };
  let stop = null;

  const load = async () => {
    try {
      state.data = await get('/telemetry/data-quality');
      state.error = null;
      state.updatedAt = Date.now();
    } catch (error) {
      state.error = error;
    }
    draw();
  };

  const draw = () => render(view(state, draw), element);
  draw();
  return {
    element,
    start() {
      stop = poll(load, REFRESH_MS);
    },
    stop() {
      stop?.();
    },
  };
}

function tile(label, value, detail, tone = '') {
  return html`<div class="tile ${tone ? `tile-${tone}` : ''}">
    <div class="tile-label">${label}</div>
    <div class="tile-value">${value}</div>
    ${detail ? html`<div class="tile-detail">${detail}</div>` : nothing}
  </div>`;
}

function scoreTone(score) {
  if (score >= 90) return 'good';
  if (score >= 60) return 'warn';
  return 'bad';
}

function summaryTiles(summary) {
  const attention =
    summary.delayedAssets + summary.silentAssets + summary.offlineAssets + summary.errorAssets + summary.poorGpsAssets;
  return html`<div class="tiles">
    ${tile(
      'Quality score',
      html`${count(summary.qualityScore)}<small>/100</small>`,
      html`<span class="meter" aria-hidden="true"><span class="meter-fill meter-${scoreTone(summary.qualityScore)}" .style=${`width: ${Math.max(0, Math.min(100, summary.qualityScore))}%`}></span></span>`,
      scoreTone(summary.qualityScore),
    )}
    ${tile('Devices online', html`${count(summary.onlineAssets)}<small> of ${count(summary.telemetryAssets)}</small>`, `${count(summary.assetsWithData)} sent data in the range`)}
    ${tile('Messages', count(summary.messageCount), `${count(summary.parsedMessages)} parsed · ${count(summary.silverEvents)} readings`)}
    ${tile('Error rate', percent(summary.errorRate), `${count(summary.errorMessages)} messages with an error`, summary.errorRate > 5 ? 'bad' : '')}
    ${tile('Valid GPS', percent(summary.gpsOkPercent), `${count(summary.validGpsEvents)} of ${count(summary.gpsEvents)} fixes`, summary.gpsOkPercent !== null && summary.gpsOkPercent < 80 ? 'warn' : '')}
    ${tile('Need attention', count(attention), attention ? `${count(summary.offlineAssets)} offline · ${count(summary.silentAssets)} silent · ${count(summary.errorAssets)} with errors` : 'every device is fine', attention ? 'warn' : 'good')}
  </div>`;
}

function statusBadge(entry) {
  return html`<span class="badge badge-${qualityTone[entry.status] ?? 'muted'}">${entry.statusLabel || entry.status}</span>`;
}

/** Worst first: the devices someone should look at head the table. */
const SEVERITY = ['errors', 'offline', 'silent', 'poor_gps', 'delayed', 'disabled', 'ok'];
const severity = (entry) => {
  const rank = SEVERITY.indexOf(entry.status);
  return rank === -1 ? SEVERITY.length : rank;
};

function deviceRows(state) {
  const search = state.search.trim().toLowerCase();
  const rows = state.data.assets.filter((entry) => {
    if (state.filter === 'attention' && entry.status === 'ok') return false;
    if (!search) return true;
    return [entry.name, entry.identifier, entry.displayCode, entry.deviceId].some((text) =>
      text?.toLowerCase().includes(search),
    );
  });
  return rows.sort((a, b) => severity(a) - severity(b) || a.name.localeCompare(b.name));
}

function devicesTable(state, draw) {
  const rows = deviceRows(state);
  const attention = state.data.assets.filter((entry) => entry.status !== 'ok').length;
  return html`<section class="card" aria-labelledby="quality-devices">
    <div class="card-head">
      <h2 id="quality-devices">Devices</h2>
      <div class="controls">
        <div class="segmented" role="group" aria-label="Show">
          <button type="button" aria-pressed=${state.filter === 'all'} @click=${() => {
            state.filter = 'all';
            draw();
          }}>All <span class="muted">${state.data.assets.length}</span></button>
          <button type="button" aria-pressed=${state.filter === 'attention'} @click=${() => {
            state.filter = 'attention';
            draw();
          }}>Needs attention <span class="muted">${attention}</span></button>
        </div>
        <label class="search"><span class="visually-hidden">Search devices</span>
          <input type="search" placeholder="Search asset or device" .value=${state.search} @input=${(event) => {
            state.search = event.target.value;
            draw();
          }}></label>
      </div>
    </div>
    <div class="table-wrap">
      <table>
        <thead><tr>
          <th scope="col">Asset</th><th scope="col">Device</th><th scope="col">Status</th><th scope="col">Notes</th>
          <th scope="col" class="num">Messages</th><th scope="col" class="num">Error rate</th>
          <th scope="col" class="num">Valid GPS</th><th scope="col">Last message</th>
        </tr></thead>
        <tbody>
          ${rows.map(
            (entry) => html`<tr>
              <th scope="row"><span class="strong">${entry.name}</span><span class="sub">${entry.assetTypeName || entry.identifier}</span></th>
              <td><code>${entry.deviceId}</code></td>
              <td>${statusBadge(entry)}</td>
              <td class="notes">${entry.notes.length ? entry.notes.join('; ') : html`<span class="muted">—</span>`}</td>
              <td class="num">${count(entry.messageCount)}</td>
              <td class="num ${entry.errorRate > 5 ? 'text-bad' : ''}">${percent(entry.errorRate)}</td>
              <td class="num">${percent(entry.gpsOkPercent)}</td>
              <td title=${when(entry.lastSeenAt)}>${ago(entry.lastSeenAt)}</td>
            </tr>`,
          )}
          ${rows.length === 0 ? html`<tr><td colspan="8" class="empty">No device matches.</td></tr>` : nothing}
        </tbody>
      </table>
    </div>
  </section>`;
}

function messageTypesTable(types) {
  return html`<section class="card" aria-labelledby="quality-types">
    <div class="card-head"><h2 id="quality-types">Message types</h2></div>
    <div class="table-wrap">
      <table>
        <thead><tr><th scope="col">Type</th><th scope="col" class="num">Devices</th><th scope="col" class="num">Messages</th>
          <th scope="col" class="num">With errors</th><th scope="col" class="num">Error rate</th></tr></thead>
        <tbody>
          ${types.map(
            (type) => html`<tr>
              <th scope="row"><code>${type.messageType}</code></th>
              <td class="num">${count(type.deviceCount)}</td>
              <td class="num">${count(type.messageCount)}</td>
              <td class="num">${count(type.errorMessages)}</td>
              <td class="num ${type.errorRate > 5 ? 'text-bad' : ''}">${percent(type.errorRate)}</td>
            </tr>`,
          )}
          ${types.length === 0 ? html`<tr><td colspan="5" class="empty">No message in the range.</td></tr>` : nothing}
        </tbody>
      </table>
    </div>
  </section>`;
}

function recentErrors(errors) {
  return html`<section class="card" aria-labelledby="quality-errors">
    <div class="card-head"><h2 id="quality-errors">Recent errors</h2><span class="muted">${errors.length} latest</span></div>
    ${
      errors.length === 0
        ? html`<p class="empty">No message with an error in the range.</p>`
        : html`<ol class="errors">
          ${errors.map(
            (error) => html`<li>
              <div class="error-head">
                <span class="badge badge-bad">${error.ingestError.split(':')[0]}</span>
                <code>${error.deviceId || error.subject}</code>
                <span class="muted">${error.messageType || 'unknown type'} · ${time(error.receivedAt)}</span>
              </div>
              <p class="error-text">${error.ingestError}</p>
              <pre class="payload" aria-label="Payload sample">${error.payloadSample}</pre>
            </li>`,
          )}
        </ol>`
    }
  </section>`;
}

function view(state, draw) {
  const { data } = state;
  return html`<div class="page-head">
      <div>
        <h1 id="quality-title">Data quality</h1>
        <p class="muted">
          Last 24 hours${state.updatedAt ? html` · updated ${time(state.updatedAt)}` : nothing} ·
          refreshes every ${REFRESH_MS / 1000} s
        </p>
      </div>
      ${data ? html`<span class="live" aria-hidden="true">Live</span>` : nothing}
    </div>
    ${state.error ? html`<p class="banner banner-bad" role="alert">Could not refresh: ${errorText(state.error)}</p>` : nothing}
    ${
      !data
        ? state.error
          ? nothing
          : html`<p class="loading" role="status">Loading data quality…</p>`
        : data.capabilityState === 'not_configured'
          ? html`<p class="banner">No device is registered for the assets this key sees.</p>`
          : html`${summaryTiles(data.summary)}
            ${devicesTable(state, draw)}
            <div class="columns">${messageTypesTable(data.messageTypes)} ${recentErrors(data.recentErrors)}</div>`
    }`;
}

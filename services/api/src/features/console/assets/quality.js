// Data quality (GET /telemetry/data-quality): summary tiles, a page of the devices that
// need attention (or of one status, or of all), the message types and the latest errors
// with their payloads, refreshed every few seconds. The API filters, searches and pages,
// so a refresh carries one page whatever the size of the fleet; `summary` and
// `messageTypes` still cover every device in scope.
import { html, nothing, render } from '../vendor/lit-html.js';
import { debounce, get, poll } from './api.js';
import { ago, count, errorText, percent, qualityTone, time, when } from './format.js';
import { pager } from './pager.js';

const REFRESH_MS = 5000;
const PAGE = 100;
const SEARCH_DELAY_MS = 300;

/** What the table can show: the statuses sent as `status`, and the summary field that counts them. */
const FILTERS = [
  { id: 'attention', label: 'Needs attention', statuses: 'errors,offline,silent,poor_gps,delayed' },
  { id: 'errors', label: 'High error rate', statuses: 'errors', counted: 'errorAssets' },
  { id: 'offline', label: 'Offline', statuses: 'offline', counted: 'offlineAssets' },
  { id: 'silent', label: 'Silent', statuses: 'silent', counted: 'silentAssets' },
  { id: 'poor_gps', label: 'Poor GPS', statuses: 'poor_gps', counted: 'poorGpsAssets' },
  { id: 'delayed', label: 'Delayed data', statuses: 'delayed', counted: 'delayedAssets' },
  { id: 'ok', label: 'OK', statuses: 'ok' },
  { id: 'disabled', label: 'Disabled', statuses: 'disabled' },
  { id: 'all', label: 'All' },
];

/** Devices needing attention: every status but ok and disabled. */
function attentionCount(summary) {
  return (
    summary.delayedAssets + summary.silentAssets + summary.offlineAssets + summary.errorAssets + summary.poorGpsAssets
  );
}

/** The count a filter button shows: the summary's where it has one; the table's own total for the filter shown. */
function filterCount(filter, state) {
  const summary = state.data?.summary;
  if (!summary) return null;
  if (filter.id === 'attention') return attentionCount(summary);
  if (filter.counted) return summary[filter.counted];
  if (filter.id === state.filter && !state.query) return state.data.paging?.total ?? null;
  return null;
}

export function qualityPage() {
  const element = document.createElement('section');
  element.setAttribute('aria-labelledby', 'quality-title');
  const state = { data: null, error: null, filter: 'attention', search: '', query: '', offset: 0, updatedAt: null };
  let stop = null;

  /** The query of what the page shows now. */
  const query = () => ({
    status: FILTERS.find((filter) => filter.id === state.filter).statuses,
    q: state.query,
    limit: PAGE,
    offset: state.offset,
  });

  const load = async () => {
    const asked = query();
    try {
      const body = await get('/telemetry/data-quality', asked);
      // Asked before a filter, search or page changed: the run queued behind this one asks again.
      if (JSON.stringify(asked) !== JSON.stringify(query())) return;
      state.data = body;
      state.error = null;
      state.updatedAt = Date.now();
    } catch (error) {
      state.error = error;
    }
    draw();
  };

  const reload = () => stop?.now();
  const searchLater = debounce(() => {
    state.query = state.search.trim();
    state.offset = 0;
    reload();
  }, SEARCH_DELAY_MS);

  const actions = {
    filter(id) {
      Object.assign(state, { filter: id, offset: 0 });
      draw();
      reload();
    },
    search(value) {
      state.search = value;
      draw();
      searchLater();
    },
    page(offset) {
      state.offset = offset;
      reload();
    },
  };

  const draw = () => render(view(state, actions), element);
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
  const attention = attentionCount(summary);
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

function devicesTable(state, actions) {
  const { data } = state;
  const rows = data.assets;
  const filter = FILTERS.find((candidate) => candidate.id === state.filter);
  const paging = data.paging ?? { limit: PAGE, offset: 0, total: rows.length };
  return html`<section class="card" aria-labelledby="quality-devices">
    <div class="card-head">
      <h2 id="quality-devices">Devices</h2>
      <div class="controls">
        <label class="search"><span class="visually-hidden">Search devices by name, identifier or device id</span>
          <input type="search" placeholder="Search name, identifier or device id" .value=${state.search}
            @input=${(event) => actions.search(event.target.value)}></label>
      </div>
    </div>
    <div class="filters" role="group" aria-label="Show">
      ${FILTERS.map((candidate) => {
        const n = filterCount(candidate, state);
        return html`<button type="button" class="chip" data-filter=${candidate.id} aria-pressed=${state.filter === candidate.id}
          @click=${() => actions.filter(candidate.id)}>${candidate.label}${n === null ? nothing : html` <span class="muted">${count(n)}</span>`}</button>`;
      })}
    </div>
    <div class="table-head">
      ${pager({ ...paging, shown: rows.length, noun: 'devices', go: actions.page })}
      <span class="muted small">By asset name${state.query ? html` · matching “${state.query}”` : nothing}</span>
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
              <th scope="row"><span class="strong">${entry.name}</span><span class="sub">${entry.identifier}${entry.assetTypeName ? ` · ${entry.assetTypeName}` : ''}</span></th>
              <td><code>${entry.deviceId}</code></td>
              <td>${statusBadge(entry)}</td>
              <td class="notes">${entry.notes.length ? entry.notes.join('; ') : html`<span class="muted">—</span>`}</td>
              <td class="num">${count(entry.messageCount)}</td>
              <td class="num ${entry.errorRate > 5 ? 'text-bad' : ''}">${percent(entry.errorRate)}</td>
              <td class="num">${percent(entry.gpsOkPercent)}</td>
              <td title=${when(entry.lastSeenAt)}>${ago(entry.lastSeenAt)}</td>
            </tr>`,
          )}
          ${rows.length === 0 ? html`<tr><td colspan="8" class="empty">${emptyText(state, filter, actions)}</td></tr>` : nothing}
        </tbody>
      </table>
    </div>
  </section>`;
}

function emptyText(state, filter, actions) {
  const showAll =
    state.filter === 'all'
      ? nothing
      : html` <button type="button" class="button small" @click=${() => actions.filter('all')}>Show all devices</button>`;
  if (state.query) return html`No device in “${filter.label}” matches “${state.query}”.${showAll}`;
  if (state.filter === 'attention') return html`No device needs attention.${showAll}`;
  return html`No device in “${filter.label}”.${showAll}`;
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

function view(state, actions) {
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
            ${devicesTable(state, actions)}
            <div class="columns">${messageTypesTable(data.messageTypes)} ${recentErrors(data.recentErrors)}</div>`
    }`;
}

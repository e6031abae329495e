// Geofence alerts (GET /telemetry/geofence-alerts): open and acknowledged, with an
// Acknowledge button (POST …/{id}/acknowledge) on the open ones.
import { html, nothing, render } from '../vendor/lit-html.js';
import { getAll, poll, post } from './api.js';
import { alertType, ago, errorText, time, when } from './format.js';

const REFRESH_MS = 10_000;
const VIEWS = { open: 'Open', acknowledged: 'Acknowledged', all: 'All' };
const RANGES = { 1: 'Last 24 hours', 7: 'Last 7 days', 30: 'Last 30 days' };

export function alertsPage({ refreshAlertCount }) {
  const element = document.createElement('section');
  element.setAttribute('aria-labelledby', 'alerts-title');
  const state = { view: 'open', days: 7, data: null, error: null, busy: new Set(), message: '', updatedAt: null };
  let stop = null;

  const draw = () => render(view(state, actions), element);

  async function load() {
    try {
      state.data = await getAll('/telemetry/geofence-alerts', {
        status: state.view === 'all' ? undefined : state.view,
        from: new Date(Date.now() - state.days * 86_400_000).toISOString(),
      });
      state.error = null;
      state.updatedAt = Date.now();
    } catch (error) {
      state.error = error;
    }
    draw();
  }

  async function acknowledge(alert) {
    state.busy.add(alert.id);
    state.message = '';
    draw();
    try {
      const updated = await post(`/telemetry/geofence-alerts/${alert.id}/acknowledge`);
      state.message = `Alert for ${updated.asset?.name ?? 'the asset'} in ${updated.geofenceName} acknowledged.`;
      await load();
      refreshAlertCount().catch(() => undefined);
    } catch (error) {
      state.message =
        error.status === 403 ? 'This key may not acknowledge alerts.' : `Could not acknowledge: ${errorText(error)}`;
    }
    state.busy.delete(alert.id);
    draw();
  }

  const actions = {
    acknowledge,
    view(value) {
      state.view = value;
      state.data = null;
      draw();
      void load();
    },
    days(value) {
      state.days = Number(value);
      state.data = null;
      draw();
      void load();
    },
  };

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

function row(alert, state, actions) {
  const busy = state.busy.has(alert.id);
  return html`<tr>
    <td title=${when(alert.createdAt)}>${when(alert.createdAt)}<span class="sub">${ago(alert.createdAt)}</span></td>
    <th scope="row"><span class="strong">${alert.asset?.name ?? '—'}</span><span class="sub">${alert.asset?.identifier ?? ''}</span></th>
    <td>${alert.geofenceName}</td>
    <td>${alertType[alert.alertType] ?? alert.alertType}</td>
    <td>${
      alert.isActive
        ? html`<span class="badge badge-bad">Still inside</span>`
        : html`<span class="badge badge-muted">Resolved ${time(alert.resolvedAt)}</span>`
    }</td>
    <td>${
      alert.status === 'open'
        ? html`<span class="badge badge-warn">Open</span>`
        : html`<span class="badge badge-good">Acknowledged</span><span class="sub">${when(alert.acknowledgedAt)}</span>`
    }</td>
    <td class="actions">${
      alert.status === 'open'
        ? html`<button type="button" class="button primary small" ?disabled=${busy} @click=${() => actions.acknowledge(alert)}
            aria-label="Acknowledge the alert for ${alert.asset?.name ?? 'this asset'} in ${alert.geofenceName}">
            ${busy ? 'Acknowledging…' : 'Acknowledge'}</button>`
        : nothing
    }</td>
  </tr>`;
}

function view(state, actions) {
  const items = state.data?.items ?? [];
  return html`<div class="page-head">
      <div>
        <h1 id="alerts-title">Geofence alerts</h1>
        <p class="muted">Alerts active at some time in the range${state.updatedAt ? html` · updated ${time(state.updatedAt)}` : nothing} · refreshes every ${REFRESH_MS / 1000} s</p>
      </div>
    </div>
    <div class="toolbar">
      <div class="segmented" role="group" aria-label="Which alerts">
        ${Object.entries(VIEWS).map(
          ([id, label]) =>
            html`<button type="button" aria-pressed=${state.view === id} @click=${() => actions.view(id)}>${label}</button>`,
        )}
      </div>
      <label>Range
        <select @change=${(event) => actions.days(event.target.value)}>
          ${Object.entries(RANGES).map(([days, label]) => html`<option value=${days} ?selected=${state.days === Number(days)}>${label}</option>`)}
        </select>
      </label>
    </div>
    ${state.message ? html`<p class="banner" role="status">${state.message}</p>` : nothing}
    ${state.error ? html`<p class="banner banner-bad" role="alert">Could not refresh: ${errorText(state.error)}</p>` : nothing}
    <section class="card" aria-labelledby="alerts-table">
      <div class="card-head"><h2 id="alerts-table">${VIEWS[state.view]} alerts <span class="muted">${state.data ? items.length : ''}</span></h2></div>
      <div class="table-wrap"><table>
        <thead><tr><th scope="col">Opened</th><th scope="col">Asset</th><th scope="col">Geofence</th><th scope="col">What</th>
          <th scope="col">Now</th><th scope="col">Status</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
        <tbody>
          ${items.map((alert) => row(alert, state, actions))}
          ${
            state.data && items.length === 0
              ? html`<tr><td colspan="7" class="empty">No ${state.view === 'all' ? '' : `${VIEWS[state.view].toLowerCase()} `}alert in this range.</td></tr>`
              : nothing
          }
          ${!state.data && !state.error ? html`<tr><td colspan="7" class="loading">Loading alerts…</td></tr>` : nothing}
        </tbody>
      </table></div>
    </section>`;
}

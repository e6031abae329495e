// The console's shell: sign-in, the navigation between pages, and one page at a time
// polling the API while it is shown.
import { html, nothing, render } from '../vendor/lit-html.js';
import { ApiError, forgetKey, get, poll, signIn, storedKey, storeKey, whenUnauthorized } from './api.js';
import { alertsPage } from './alerts.js';
import { errorText } from './format.js';
import { fleetPage } from './fleet.js';
import { qualityPage } from './quality.js';
import { usagePage } from './usage.js';

const root = document.getElementById('app');
// The page's "Loading…" line is plain HTML; lit renders after whatever is there.
root.textContent = '';

const pages = [
  { id: 'quality', title: 'Data quality', create: qualityPage },
  { id: 'fleet', title: 'Fleet', create: fleetPage },
  { id: 'usage', title: 'Utilization', create: usagePage },
  { id: 'alerts', title: 'Alerts', create: alertsPage },
];

const state = {
  me: null,
  signInError: '',
  signingIn: false,
  openAlerts: null,
  current: null,
};

/** Pages made so far (each keeps its element, so the map and charts survive a tab switch). */
const made = new Map();
let stopAlertCount = null;

function currentPageId() {
  const id = location.hash.replace(/^#\/?/, '');
  return pages.some((page) => page.id === id) ? id : 'quality';
}

function signInView() {
  const submit = async (event) => {
    event.preventDefault();
    const key = new FormData(event.target).get('key')?.toString().trim() ?? '';
    if (!key) {
      state.signInError = 'Enter an API key.';
      return draw();
    }
    state.signingIn = true;
    state.signInError = '';
    draw();
    try {
      state.me = await signIn(key);
      storeKey(key);
      event.target.reset();
      start();
    } catch (error) {
      state.signInError =
        error instanceof ApiError && error.status === 401
          ? `This key was not accepted: ${error.message}. Check that you copied the whole key, and that it has not been disabled.`
          : `Could not sign in: ${errorText(error)}`;
    } finally {
      state.signingIn = false;
      draw();
    }
  };
  return html`<main class="signin">
    <form class="signin-card" @submit=${submit} novalidate>
      <div class="brand brand-large"><span class="brand-mark" aria-hidden="true"></span>Gantry</div>
      <h1>Operations console</h1>
      <p class="muted">Data quality, the live fleet, utilization and geofence alerts, as your API key sees them.</p>
      <label for="key">API key</label>
      <input id="key" name="key" type="password" autocomplete="off" spellcheck="false" required
        aria-describedby="key-help${state.signInError ? ' key-error' : ''}" aria-invalid=${state.signInError ? 'true' : 'false'}>
      <p id="key-help" class="hint">
        Kept in this browser tab only (session storage) and sent in the <code>X-API-Key</code> header, never in a URL.
        <code>pnpm start</code> prints a demo key.
      </p>
      ${state.signInError ? html`<p id="key-error" class="form-error" role="alert">${state.signInError}</p>` : nothing}
      <button class="button primary" type="submit" ?disabled=${state.signingIn}>
        ${state.signingIn ? 'Signing in…' : 'Sign in'}
      </button>
    </form>
  </main>`;
}

function shellView() {
  const { me } = state;
  const scope = me.pending
    ? 'Checking the key…'
    : me.apiKey.customerScoped
      ? `Customer: ${me.apiKey.customerName}`
      : 'Whole tenant';
  return html`<a class="skip" href="#page">Skip to content</a>
    <header class="topbar">
      <div class="brand"><span class="brand-mark" aria-hidden="true"></span>Gantry <span class="brand-sub">console</span></div>
      <nav aria-label="Pages">
        <ul>
          ${pages.map(
            (page) => html`<li>
              <a href="#/${page.id}" aria-current=${state.current === page.id ? 'page' : 'false'}>
                ${page.title}${
                  page.id === 'alerts' && state.openAlerts
                    ? html` <span class="count" aria-label="${state.openAlerts} open">${state.openAlerts}</span>`
                    : nothing
                }
              </a>
            </li>`,
          )}
        </ul>
      </nav>
      <div class="who">
        <span class="tenant" title=${me.apiKey.name}>${me.tenant.name}</span>
        <span class="scope ${me.apiKey.customerScoped ? 'scope-customer' : ''}">${scope}</span>
        <button class="button ghost" type="button" @click=${() => signOut()}>Sign out</button>
      </div>
    </header>
    <main id="page" tabindex="-1"></main>`;
}

function draw() {
  render(state.me ? shellView() : signInView(), root);
}

function showPage() {
  const id = currentPageId();
  if (state.current === id && made.has(id)) return;
  const previous = state.current ? made.get(state.current) : null;
  previous?.stop();
  if (previous) previous.element.hidden = true;
  state.current = id;
  draw();
  let page = made.get(id);
  if (!page) {
    const spec = pages.find((candidate) => candidate.id === id);
    page = spec.create({ me: state.me, refreshAlertCount });
    page.element.classList.add('page', `page-${id}`);
    made.set(id, page);
    document.getElementById('page').append(page.element);
  }
  page.element.hidden = false;
  document.title = `${pages.find((candidate) => candidate.id === id).title} · Gantry console`;
  page.start();
}

async function refreshAlertCount() {
  const body = await get('/telemetry/geofence-alerts', { status: 'open', limit: 100 });
  state.openAlerts = body.items.length >= 100 ? '99+' : body.items.length || null;
  draw();
}

function start() {
  draw();
  showPage();
  // The open-alert count can wait until the first page has what it asked for.
  const delay = setTimeout(() => {
    stopAlertCount = poll(refreshAlertCount, 15_000);
  }, 2000);
  stopAlertCount = () => clearTimeout(delay);
}

function signOut(message = '') {
  forgetKey();
  stopAlertCount?.();
  for (const page of made.values()) {
    page.stop();
    page.element.remove();
  }
  made.clear();
  Object.assign(state, { me: null, current: null, openAlerts: null, signInError: message });
  draw();
  document.getElementById('key')?.focus();
}

whenUnauthorized((error) => signOut(`You were signed out: the API no longer accepts this key (${error.message}).`));

window.addEventListener('hashchange', () => {
  if (!state.me) return;
  showPage();
  document.getElementById('page')?.focus({ preventScroll: true });
});

/**
 * With a key already in this tab, the shell and the page start at once and /me is asked
 * alongside the page's own data (the first screen waits for one round trip, not two);
 * a refused key signs out.
 */
async function boot() {
  const key = storedKey();
  if (!key) {
    draw();
    document.getElementById('key')?.focus();
    return;
  }
  state.me = { pending: true, tenant: { name: '…' }, apiKey: { name: '', customerName: null, customerScoped: false } };
  start();
  try {
    state.me = await signIn(key);
    draw();
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) signOut('');
    else signOut(`Could not sign in: ${errorText(error)}`);
  }
}

void boot();

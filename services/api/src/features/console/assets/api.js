// Talks to the public external API with the key the user typed. The key lives in this
// tab's sessionStorage and travels only in the X-API-Key header: never in a URL, so it
// cannot leak through history, logs or the Referer header.

const KEY_STORAGE = 'gantry.console.apiKey';
const apiBase = document.querySelector('meta[name="gantry-api-base"]')?.content ?? '/api/external/v1';

export class ApiError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function storedKey() {
  return sessionStorage.getItem(KEY_STORAGE);
}

export function storeKey(key) {
  sessionStorage.setItem(KEY_STORAGE, key);
}

export function forgetKey() {
  sessionStorage.removeItem(KEY_STORAGE);
}

let onUnauthorized = () => {};
/** Called when a key that worked is refused later (disabled or deleted meanwhile). */
export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

/** `/telemetry/devices` + `{ limit: 500 }` → the URL, parameters without a value left out. */
function url(path, params = {}) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') query.set(name, String(value));
  }
  const text = query.toString();
  return `${apiBase}${path}${text ? `?${text}` : ''}`;
}

async function request(path, { params, method = 'GET', key = storedKey(), accept = 'application/json' } = {}) {
  let response;
  try {
    response = await fetch(url(path, params), {
      method,
      headers: { 'X-API-Key': key ?? '', Accept: accept },
      cache: 'no-store',
      credentials: 'omit',
    });
  } catch {
    throw new ApiError(0, 'the API could not be reached (is Gantry running?)', 'network_error');
  }
  if (!response.ok) {
    const body = await response.json().catch(() => null);
    const error = new ApiError(
      response.status,
      body?.error ?? `the API answered ${response.status}`,
      body?.code ?? 'http_error',
    );
    if (response.status === 401 && key === storedKey()) onUnauthorized(error);
    throw error;
  }
  return response;
}

export async function get(path, params) {
  return (await request(path, { params })).json();
}

export async function post(path) {
  return (await request(path, { method: 'POST' })).json();
}

/** Every page of a list (the API pages by 500 at most), up to `maxPages`. */
export async function getAll(path, params = {}, maxPages = 20) {
  const items = [];
  for (let page = 0; page < maxPages; page += 1) {
    const body = await get(path, { ...params, limit: 500, offset: page * 500 });
    items.push(...body.items);
    if (body.items.length < 500) return { ...body, items };
  }
  return { items, truncated: true };
}

/** Checks a key with GET /me before keeping it. */
export async function signIn(key) {
  return (await request('/me', { key })).json();
}

/**
 * Downloads an export (CSV or XLSX) through fetch, so the key stays in a header, and
 * hands the bytes to the browser as a file.
 */
export async function download(path, params, filename) {
  const response = await request(path, { params, accept: '*/*' });
  const blob = await response.blob();
  const link = document.createElement('a');
  link.href = URL.createObjectURL(blob);
  link.download = filename;
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
  return { bytes: blob.size, truncated: response.headers.get('X-Export-Truncated') === 'true' };
}

/** `fn` once the calls to the returned function pause for `ms`: a search box's requests. */
export function debounce(fn, ms) {
  let timer = 0;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

/**
 * Runs `task` now and then every `intervalMs` after each run ends (never two at once),
 * skipping runs while the tab is hidden. Returns a function that stops it; its `now()`
 * runs the task at once (or right after the run under way), for a change the user made.
 */
export function poll(task, intervalMs) {
  let timer = 0;
  let stopped = false;
  let running = false;
  let again = false;
  const run = async () => {
    if (stopped) return;
    clearTimeout(timer);
    if (running) {
      again = true;
      return;
    }
    running = true;
    if (!document.hidden) await task().catch(() => undefined);
    running = false;
    if (stopped) return;
    if (again) {
      again = false;
      void run();
    } else {
      timer = setTimeout(run, intervalMs);
    }
  };
  void run();
  const stop = () => {
    stopped = true;
    clearTimeout(timer);
  };
  stop.now = () => void run();
  return stop;
}

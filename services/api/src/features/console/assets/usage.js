// Utilization and container work (GET /telemetry/utilization: its items carry the
// container-work figures too) by hour or day, for the fleet or one asset: two charts, a
// table, and CSV/XLSX downloads from the export endpoints.
import { html, nothing, render } from '../vendor/lit-html.js';
import { download, getAll, poll } from './api.js';
import { assetPicker } from './asset-picker.js';
import { count, day, errorText, hours, km, percent, time, utcDate, when } from './format.js';

const REFRESH_MS = 60_000;
const DAY_MS = 86_400_000;

const PRESETS = {
  '24h': { label: 'Last 24 hours', bucket: 'hour' },
  '7d': { label: 'Last 7 days', bucket: 'day' },
  '30d': { label: 'Last 30 days', bucket: 'day' },
  custom: { label: 'Custom', bucket: 'day' },
};

/** The query the page asks for: range, bucket and scope. */
function queryOf(state) {
  const now = Date.now();
  let range;
  if (state.preset === '24h') {
    range = { from: new Date(now - DAY_MS).toISOString(), to: new Date(now).toISOString() };
  } else if (state.preset === 'custom') {
    range = { from: state.from, to: state.to };
  } else {
    const days = state.preset === '7d' ? 7 : 30;
    range = { from: utcDate(now - (days - 1) * DAY_MS), to: utcDate(now) };
  }
  return {
    ...range,
    bucket: state.bucket,
    groupBy: state.assetId ? 'asset' : 'fleet',
    assetId: state.assetId || undefined,
  };
}

/** The inner width of a chart's box (its padding left out), so the canvas fits the card. */
function chartWidth(element) {
  const box = element.querySelector('.chart');
  if (!box) return 600;
  const style = getComputedStyle(box);
  return Math.max(260, box.clientWidth - Number.parseFloat(style.paddingLeft) - Number.parseFloat(style.paddingRight));
}

export function usagePage() {
  const element = document.createElement('section');
  element.setAttribute('aria-labelledby', 'usage-title');
  const today = utcDate(Date.now());
  const state = {
    preset: '24h',
    bucket: 'hour',
    assetId: '',
    assetName: '',
    from: utcDate(Date.now() - 6 * DAY_MS),
    to: today,
    data: null,
    error: null,
    loading: false,
    exporting: '',
    exportMessage: '',
    updatedAt: null,
  };
  let uPlot = null;
  const charts = {};
  let stop = null;
  let resizeObserver = null;

  const draw = () => render(view(state, actions), element);
  const picker = assetPicker({ id: 'usage-asset', onPick: (asset) => actions.asset(asset), draw });

  async function load() {
    state.loading = true;
    draw();
    try {
      state.data = await getAll('/telemetry/utilization', queryOf(state));
      state.error = null;
      state.updatedAt = Date.now();
    } catch (error) {
      state.error = error;
    }
    state.loading = false;
    draw();
    await drawCharts();
  }

  async function drawCharts() {
    if (!state.data) return;
    if (!uPlot) uPlot = (await import('../vendor/uplot.js')).default;
    const items = state.data.items;
    const xs = items.map((item) => Date.parse(item.bucketStart) / 1000);
    const width = chartWidth(element);
    const common = (title) => ({
      width,
      height: 220,
      title: undefined,
      cursor: { drag: { x: false, y: false } },
      legend: { live: true },
      scales: { x: { time: true } },
      axes: [
        { stroke: '#57606a', grid: { stroke: '#eaeef2' }, ticks: { stroke: '#d0d7de' } },
        {
          stroke: '#57606a',
          grid: { stroke: '#eaeef2' },
          ticks: { stroke: '#d0d7de' },
          values: (_u, values) => values.map((value) => `${value}${title === 'percent' ? ' %' : ''}`),
        },
      ],
    });
    const bars = uPlot.paths.bars({ size: [0.7, 48] });
    const specs = {
      utilization: {
        options: {
          ...common('percent'),
          scales: { x: { time: true }, y: { range: [0, 100] } },
          series: [
            {},
            {
              label: 'Utilization',
              stroke: '#0969da',
              fill: 'rgba(9, 105, 218, 0.25)',
              paths: bars,
              points: { show: false },
              value: (_u, v) => percent(v),
            },
            {
              label: 'Idle (of running)',
              stroke: '#bf8700',
              width: 2,
              points: { size: 4 },
              value: (_u, v) => percent(v),
            },
          ],
        },
        data: [xs, items.map((item) => item.utilizationPercent), items.map((item) => item.idlePercent)],
      },
      work: {
        options: {
          ...common('count'),
          scales: {
            x: { time: true },
            y: { range: (_u, _min, max) => [0, Math.max(4, max)] },
            pct: { range: [0, 100] },
          },
          axes: [
            ...common('count').axes,
            {
              side: 1,
              scale: 'pct',
              stroke: '#57606a',
              grid: { show: false },
              values: (_u, values) => values.map((value) => `${value} %`),
            },
          ],
          series: [
            {},
            {
              label: 'Container cycles',
              stroke: '#1a7f37',
              fill: 'rgba(31, 136, 61, 0.35)',
              paths: bars,
              points: { show: false },
              value: (_u, v) => count(v),
            },
            {
              label: 'Loaded time',
              stroke: '#8250df',
              width: 2,
              scale: 'pct',
              points: { size: 4 },
              value: (_u, v) => percent(v),
            },
          ],
        },
        data: [
          xs,
          items.map((item) => item.containerWork.containerCycleCount),
          items.map((item) => item.containerWork.loadedPercent),
        ],
      },
    };
    for (const [name, spec] of Object.entries(specs)) {
      const target = element.querySelector(`.chart-${name}`);
      if (!target) continue;
      charts[name]?.destroy();
      charts[name] = new uPlot(spec.options, spec.data, target);
    }
    if (!resizeObserver) {
      resizeObserver = new ResizeObserver(() => {
        const width = chartWidth(element);
        for (const chart of Object.values(charts)) chart.setSize({ width, height: 220 });
      });
      resizeObserver.observe(element.querySelector('.charts'));
    }
  }

  async function exportFile(name, format) {
    const query = queryOf(state);
    state.exporting = `${name}.${format}`;
    state.exportMessage = '';
    draw();
    try {
      const result = await download(
        `/telemetry/${name}/export.${format}`,
        { ...query, offset: 0 },
        `gantry-${name}-${query.bucket}-${String(query.from).slice(0, 10)}.${format}`,
      );
      state.exportMessage = `Downloaded ${name}.${format} (${count(result.bytes / 1024)} KB)${result.truncated ? ', the first 50,000 rows' : ''}.`;
    } catch (error) {
      state.exportMessage = `Export failed: ${errorText(error)}`;
    }
    state.exporting = '';
    draw();
  }

  const actions = {
    preset(value) {
      state.preset = value;
      state.bucket = PRESETS[value].bucket;
      void load();
    },
    bucket(value) {
      state.bucket = value;
      void load();
    },
    asset(asset) {
      state.assetId = asset?.id ?? '';
      state.assetName = asset?.name ?? '';
      void load();
    },
    range(field, value) {
      state[field] = value;
      if (state.from && state.to && state.from <= state.to) void load();
    },
    exportFile,
    picker,
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

function totals(items) {
  const sum = (pick) => items.reduce((total, item) => total + (pick(item) ?? 0), 0);
  const running = sum((item) => item.runningSeconds);
  const loaded = sum((item) => item.containerWork.loadedSeconds);
  const empty = sum((item) => item.containerWork.emptySeconds);
  return {
    utilization: items.length ? sum((item) => item.utilizationPercent) / items.length : null,
    running,
    idle: running ? (sum((item) => item.stationaryRunningSeconds) / running) * 100 : null,
    distance: sum((item) => item.distanceM),
    cycles: sum((item) => item.containerWork.containerCycleCount),
    loaded: loaded + empty ? (loaded / (loaded + empty)) * 100 : null,
  };
}

function controls(state, actions) {
  return html`<div class="toolbar" role="group" aria-label="What to show">
    <label>Range
      <select @change=${(event) => actions.preset(event.target.value)}>
        ${Object.entries(PRESETS).map(([id, preset]) => html`<option value=${id} ?selected=${state.preset === id}>${preset.label}</option>`)}
      </select>
    </label>
    ${
      state.preset === 'custom'
        ? html`<label>From <input type="date" .value=${state.from} @change=${(event) => actions.range('from', event.target.value)}></label>
          <label>To <input type="date" .value=${state.to} @change=${(event) => actions.range('to', event.target.value)}></label>`
        : nothing
    }
    <div class="segmented" role="group" aria-label="Bucket">
      <button type="button" aria-pressed=${state.bucket === 'hour'} @click=${() => actions.bucket('hour')}>By hour</button>
      <button type="button" aria-pressed=${state.bucket === 'day'} @click=${() => actions.bucket('day')}>By day</button>
    </div>
    ${actions.picker.view()}
  </div>`;
}

function exportsBar(state, actions) {
  const button = (name, format, label) =>
    html`<button type="button" class="button" ?disabled=${Boolean(state.exporting)} @click=${() => actions.exportFile(name, format)}>
      ${state.exporting === `${name}.${format}` ? 'Preparing…' : label}</button>`;
  return html`<div class="exports" role="group" aria-label="Downloads">
    <span class="muted small">Utilization</span>${button('utilization', 'csv', 'CSV')}${button('utilization', 'xlsx', 'XLSX')}
    <span class="muted small">Container work</span>${button('container-work', 'csv', 'CSV')}${button('container-work', 'xlsx', 'XLSX')}
    <span class="small" role="status">${state.exportMessage}</span>
  </div>`;
}

function table(state) {
  const items = [...state.data.items].reverse();
  const label = (item) => (state.data.bucket === 'day' ? day(item.bucketStart) : when(item.bucketStart));
  return html`<section class="card" aria-labelledby="usage-table">
    <div class="card-head"><h2 id="usage-table">${state.data.bucket === 'day' ? 'Days' : 'Hours'}</h2>
      <span class="muted small">source: ${state.data.source}${state.data.aggregateRefresh?.updatedAt ? ` · aggregates refreshed ${time(state.data.aggregateRefresh.updatedAt)}` : ''}</span></div>
    <div class="table-wrap"><table>
      <thead><tr>
        <th scope="col">${state.data.bucket === 'day' ? 'Day' : 'Hour'}</th>
        ${state.assetId ? html`<th scope="col">Asset</th>` : nothing}
        <th scope="col" class="num">Running</th><th scope="col" class="num">Utilization</th><th scope="col" class="num">Idle</th>
        <th scope="col" class="num">Distance</th><th scope="col" class="num">Hourmeter</th>
        <th scope="col" class="num">Container cycles</th><th scope="col" class="num">Loaded</th>
      </tr></thead>
      <tbody>${items.map(
        (item) => html`<tr>
          <th scope="row">${label(item)}</th>
          ${state.assetId ? html`<td>${item.asset?.name ?? '—'}</td>` : nothing}
          <td class="num">${hours(item.runningSeconds)}</td>
          <td class="num">${percent(item.utilizationPercent)}</td>
          <td class="num">${percent(item.idlePercent)}</td>
          <td class="num">${km(item.distanceM)}</td>
          <td class="num">${hours(item.hourmeterDelta)}</td>
          <td class="num">${count(item.containerWork.containerCycleCount)}</td>
          <td class="num">${percent(item.containerWork.loadedPercent)}</td>
        </tr>`,
      )}
      ${items.length === 0 ? html`<tr><td colspan="9" class="empty">Nothing ran in this range.</td></tr>` : nothing}
      </tbody>
    </table></div>
  </section>`;
}

/** "172.8 h" → the number large and its unit small. */
function unit(text) {
  const [number, ...rest] = text.split(' ');
  return rest.length ? html`${number}<small> ${rest.join(' ')}</small>` : text;
}

function view(state, actions) {
  const sum = state.data ? totals(state.data.items) : null;
  const tile = (label, value) =>
    html`<div class="tile"><div class="tile-label">${label}</div><div class="tile-value">${value}</div></div>`;
  return html`<div class="page-head">
      <div>
        <h1 id="usage-title">Utilization and container work</h1>
        <p class="muted">${state.assetId ? state.assetName : 'Whole fleet'} ·
          ${PRESETS[state.preset].label.toLowerCase()} by ${state.bucket}${state.updatedAt ? html` · updated ${time(state.updatedAt)}` : nothing}</p>
      </div>
      ${state.loading ? html`<span class="muted small" role="status">Loading…</span>` : nothing}
    </div>
    ${controls(state, actions)}
    ${exportsBar(state, actions)}
    ${state.error ? html`<p class="banner banner-bad" role="alert">Could not load: ${errorText(state.error)}</p>` : nothing}
    ${
      sum
        ? html`<div class="tiles">
          ${tile('Utilization', unit(percent(sum.utilization)))}
          ${tile('Running', unit(hours(sum.running)))}
          ${tile('Idle of running', unit(percent(sum.idle)))}
          ${tile('Distance', unit(km(sum.distance)))}
          ${tile('Container cycles', count(sum.cycles))}
          ${tile('Loaded time', unit(percent(sum.loaded)))}
        </div>`
        : nothing
    }
    <div class="charts columns">
      <section class="card" aria-labelledby="usage-chart-utilization">
        <div class="card-head"><h2 id="usage-chart-utilization">Utilization</h2><span class="muted small">running time per bucket, and idle share of it</span></div>
        <div class="chart chart-utilization" role="img" aria-label="Utilization and idle percentage per ${state.bucket}"></div>
      </section>
      <section class="card" aria-labelledby="usage-chart-work">
        <div class="card-head"><h2 id="usage-chart-work">Container work</h2><span class="muted small">lifts (spreader locked) and loaded share of running time</span></div>
        <div class="chart chart-work" role="img" aria-label="Container cycles and loaded percentage per ${state.bucket}"></div>
      </section>
    </div>
    ${state.data ? table(state) : html`<p class="loading" role="status">Loading utilization…</p>`}`;
}

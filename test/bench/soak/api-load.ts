import autocannon from 'autocannon';

/** One endpoint of the rotation: a path under /api/external/v1 and the key it is called with. */
export interface Endpoint {
  name: string;
  path: string;
  key: string;
}

export interface LoadWindow {
  requests: number;
  /** Responses per status class and code. */
  statuses: Map<number, number>;
  non2xx: number;
  status5xx: number;
  /** Connection errors and timeouts (no response at all). */
  failures: number;
  p50: number;
  p95: number;
  max: number;
}

export interface EndpointTotals {
  name: string;
  requests: number;
  non2xx: number;
  status5xx: number;
  p50: number;
  p95: number;
  max: number;
}

export interface ApiLoad {
  /** What happened since the previous call (one row of the table). */
  takeWindow(): LoadWindow;
  /** Per endpoint, over the whole run. */
  endpointTotals(): EndpointTotals[];
  stop(): Promise<void>;
}

/** Response times in whole milliseconds up to a minute, so long runs keep bounded memory. */
class LatencyHistogram {
  private readonly counts = new Uint32Array(60_001);
  count = 0;
  max = 0;

  record(ms: number): void {
    const bucket = Math.min(60_000, Math.max(0, Math.round(ms)));
    this.counts[bucket]! += 1;
    this.count += 1;
    this.max = Math.max(this.max, ms);
  }

  percentile(p: number): number {
    if (this.count === 0) return Number.NaN;
    const rank = Math.ceil((p / 100) * this.count);
    let seen = 0;
    for (let ms = 0; ms < this.counts.length; ms += 1) {
      seen += this.counts[ms]!;
      if (seen >= rank) return ms;
    }
    return this.max;
  }
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/**
 * Closed-loop HTTP load with autocannon: `connections` keep-alive connections, each going
 * round the endpoints in order, for as long as the soak runs (or at `rate` requests/s
 * overall when given). Every response is attributed to its endpoint: autocannon calls
 * the request's onResponse and then emits `response` synchronously for the same request.
 */
export function startApiLoad(options: {
  url: string;
  endpoints: Endpoint[];
  connections: number;
  rate?: number;
  durationSeconds: number;
}): ApiLoad {
  let current = 0;
  const perEndpoint = options.endpoints.map((endpoint) => ({
    endpoint,
    histogram: new LatencyHistogram(),
    non2xx: 0,
    status5xx: 0,
  }));
  let window = { latencies: [] as number[], statuses: new Map<number, number>(), failures: 0 };

  const instance = autocannon(
    {
      url: options.url,
      connections: options.connections,
      duration: options.durationSeconds,
      timeout: 30,
      ...(options.rate ? { overallRate: options.rate } : {}),
      requests: options.endpoints.map((endpoint, index) => ({
        method: 'GET' as const,
        path: `/api/external/v1${endpoint.path}`,
        headers: { 'x-api-key': endpoint.key },
        onResponse: () => {
          current = index;
        },
      })),
    },
    () => undefined,
  );
  instance.on('response', (_client, statusCode, _bytes, responseTime) => {
    window.latencies.push(responseTime);
    window.statuses.set(statusCode, (window.statuses.get(statusCode) ?? 0) + 1);
    const slot = perEndpoint[current]!;
    slot.histogram.record(responseTime);
    if (statusCode < 200 || statusCode > 299) slot.non2xx += 1;
    if (statusCode >= 500) slot.status5xx += 1;
  });
  instance.on('reqError', () => {
    window.failures += 1;
  });
  const done = new Promise<void>((resolve) => instance.once('done', () => resolve()));

  return {
    takeWindow() {
      const taken = window;
      window = { latencies: [], statuses: new Map(), failures: 0 };
      const sorted = taken.latencies.sort((a, b) => a - b);
      let non2xx = 0;
      let status5xx = 0;
      for (const [status, count] of taken.statuses) {
        if (status < 200 || status > 299) non2xx += count;
        if (status >= 500) status5xx += count;
      }
      return {
        requests: sorted.length,
        statuses: taken.statuses,
        non2xx,
        status5xx,
        failures: taken.failures,
        p50: percentile(sorted, 50),
        p95: percentile(sorted, 95),
        max: sorted.length > 0 ? sorted[sorted.length - 1]! : Number.NaN,
      };
    },
    endpointTotals() {
      return perEndpoint.map(({ endpoint, histogram, non2xx, status5xx }) => ({
        name: endpoint.name,
        requests: histogram.count,
        non2xx,
        status5xx,
        p50: histogram.percentile(50),
        p95: histogram.percentile(95),
        max: histogram.max,
      }));
    },
    async stop() {
      instance.stop();
      await Promise.race([done, new Promise((resolve) => setTimeout(resolve, 5_000))]);
    },
  };
}

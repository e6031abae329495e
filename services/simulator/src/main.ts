import { parseArgs } from 'node:util';
import { createLogger } from '@gantry/logger';
import { startSimulator } from './fleet.ts';
import { publishMessages } from './playback.ts';
import { createPublisher } from './publisher.ts';
import { DEMO_YARD, fleetTraffic } from './traffic.ts';

const usage = `gantry simulator: publishes a simulated fleet over MQTT

  node services/simulator/dist/main.js [options]   (or: pnpm --filter @gantry/simulator start [options])

  --mqtt-url URL       broker (default $GANTRY_MQTT_URL or mqtt://127.0.0.1:1883)
  --devices IDS        comma-separated device ids (default demo-sc-01,demo-rs-02,…: the demo's)
  --count N            with no --devices: the first N demo device ids (default 20)
  --interval-ms MS     live mode: time between a machine's GPS fixes (default 2000)
  --late F             live mode: share of ticks a machine goes out of coverage (default 0.002)
  --duplicates F       live mode: share of messages sent twice (default 0.01)
  --bad F              live mode: share of ticks with one bad message (default 0)
  --burst N            instead of live mode: publish N readings as fast as allowed, then exit
  --rate R             burst mode: messages per second (default: unlimited)
  --lat, --lon         yard centre (default the demo yard ${DEMO_YARD.lat}, ${DEMO_YARD.lon})`;

/** The demo's device ids (provisionDemo): SC, RS and FL in turn, numbered from 01. */
function demoDeviceIds(count: number): string[] {
  const codes = ['sc', 'rs', 'fl'];
  return Array.from({ length: count }, (_, index) => `demo-${codes[index % 3]}-${String(index + 1).padStart(2, '0')}`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'mqtt-url': { type: 'string' },
      devices: { type: 'string' },
      count: { type: 'string' },
      'interval-ms': { type: 'string' },
      late: { type: 'string' },
      duplicates: { type: 'string' },
      bad: { type: 'string' },
      burst: { type: 'string' },
      rate: { type: 'string' },
      lat: { type: 'string' },
      lon: { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) {
    console.log(usage);
    return;
  }
  const number = (name: string, value: string | undefined, fallback: number) => {
    if (value === undefined) return fallback;
    const parsed = Number(value);
    if (!Number.isFinite(parsed) || parsed < 0)
      throw new Error(`--${name} must be a non-negative number (got "${value}")`);
    return parsed;
  };
  const mqttUrl = values['mqtt-url'] ?? process.env.GANTRY_MQTT_URL ?? 'mqtt://127.0.0.1:1883';
  const deviceIds = values.devices
    ? values.devices.split(',').filter(Boolean)
    : demoDeviceIds(number('count', values.count, 20));
  const center = { lat: number('lat', values.lat, DEMO_YARD.lat), lon: number('lon', values.lon, DEMO_YARD.lon) };
  const logger = createLogger({
    level: 'info',
    format: process.stdout.isTTY ? 'pretty' : 'json',
    name: 'gantry-simulator',
  });

  if (values.burst !== undefined) {
    const count = number('burst', values.burst, 0);
    const publisher = await createPublisher({ mqttUrl, window: 2000 });
    const started = performance.now();
    const sent = await publishMessages(
      publisher,
      fleetTraffic({ deviceIds, count, start: Date.now() - count * 10, stepMs: 10, center }),
      {
        rate: number('rate', values.rate, 0),
      },
    );
    const seconds = (performance.now() - started) / 1000;
    await publisher.close();
    logger.info(
      { sent, seconds: Number(seconds.toFixed(2)), perSecond: Math.round(sent / seconds) },
      'burst published',
    );
    return;
  }

  const simulator = await startSimulator({
    mqttUrl,
    devices: deviceIds.map((deviceId) => ({ deviceId })),
    center,
    intervalMs: number('interval-ms', values['interval-ms'], 2000),
    lateFraction: number('late', values.late, 0.002),
    duplicateFraction: number('duplicates', values.duplicates, 0.01),
    badFraction: number('bad', values.bad, 0),
    logger,
  });
  const stop = () => {
    simulator.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});

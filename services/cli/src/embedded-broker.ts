import net from 'node:net';
import { Aedes } from 'aedes';
import type { Logger } from '@gantry/logger';
import { choosePort } from '@gantry/db';

export interface EmbeddedBroker {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/**
 * An in-process MQTT broker (aedes) on 127.0.0.1:port (or the next free port when that
 * default is taken and not `fixed`) for the zero-setup start. It
 * speaks MQTT 3.1.1 with persistent sessions held in memory: enough for a newcomer's
 * machine, not for production (docker-compose.yml runs Mosquitto).
 */
export async function startEmbeddedBroker(
  requested: { port: number; fixed: boolean },
  logger: Logger,
): Promise<EmbeddedBroker> {
  const port = await choosePort({
    ...requested,
    host: '127.0.0.1',
    listener: 'the embedded MQTT broker',
    remedy: 'set GANTRY_MQTT_PORT to a free port, or GANTRY_MQTT_URL to use that broker',
  });
  const broker = await Aedes.createBroker({ drainTimeout: 30_000 });
  const server = net.createServer(broker.handle);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  logger.info({ port }, 'embedded MQTT broker listening');
  return {
    url: `mqtt://127.0.0.1:${port}`,
    port,
    stop: () =>
      new Promise<void>((resolve) => {
        broker.close(() => server.close(() => resolve()));
      }),
  };
}

import net from 'node:net';

/** Resolves when something accepts connections on 127.0.0.1:port. */
export function isPortInUse(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Whether a server could listen on host:port now. Listening (rather than connecting)
 * also sees a listener on another address of the machine, such as a Mosquitto on
 * 0.0.0.0:1883 that would make the embedded broker's listen fail.
 */
function canListen(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(false));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

/** One of the listeners `gantry start` opens, and what it says when its port is taken. */
export interface PortRequest {
  port: number;
  /** Set in the environment: that port or none. */
  fixed: boolean;
  host: string;
  /** Who listens, for the error: "the embedded MQTT broker". */
  listener: string;
  /** What to do instead, for the error: "set GANTRY_MQTT_PORT to a free port, …". */
  remedy: string;
}

/** How far past a taken default port to look for a free one. */
const SEARCH_SPAN = 100;

/**
 * The port a listener of `gantry start` gets. A default port that is taken (a local
 * Mosquitto on 1883, another program on 8080) gives way to the next free one, so a first
 * start does not trip; a port set in the environment is taken literally, and if it is
 * taken start-up stops with an error naming it and the way out. Port 0 (any free port)
 * is passed through.
 */
export async function choosePort(request: PortRequest): Promise<number> {
  if (request.port === 0) return 0;
  if (await canListen(request.port, request.host)) return request.port;
  if (!request.fixed) {
    const last = Math.min(65535, request.port + SEARCH_SPAN);
    for (let candidate = request.port + 1; candidate <= last; candidate++) {
      if (await canListen(candidate, request.host)) return candidate;
    }
  }
  const which = request.fixed
    ? `port ${request.port} is already in use`
    : `ports ${request.port} to ${Math.min(65535, request.port + SEARCH_SPAN)} are all in use`;
  throw new Error(`${which}, so ${request.listener} cannot start there; ${request.remedy}`);
}

import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * The ports a running `gantry start` listens on (a default port that was taken has moved
 * to the next free one, so the configuration alone does not tell): `postgres` is null
 * with GANTRY_DATABASE_URL, `mqtt` is the configured broker's port with GANTRY_MQTT_URL.
 */
export interface RunningPorts {
  api: number;
  mqtt: number;
  postgres: number | null;
}

interface RunningFile {
  pid: number;
  startedAt: string;
  ports: RunningPorts;
}

function runningFilePath(dataDir: string): string {
  return path.join(path.resolve(dataDir), 'running.json');
}

/** Writes `<dataDir>/running.json`; resolves with its path, for removeRunningFile on stop. */
export async function writeRunningFile(dataDir: string, ports: RunningPorts): Promise<string> {
  const file = runningFilePath(dataDir);
  const content: RunningFile = { pid: process.pid, startedAt: new Date().toISOString(), ports };
  await writeFile(file, `${JSON.stringify(content, null, 2)}\n`);
  return file;
}

export async function removeRunningFile(file: string): Promise<void> {
  await rm(file, { force: true });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The running `gantry start` of this data directory, or null (none, or one that died without removing its file). */
export async function readRunningFile(dataDir: string): Promise<RunningFile | null> {
  let running: RunningFile;
  try {
    running = JSON.parse(await readFile(runningFilePath(dataDir), 'utf8')) as RunningFile;
  } catch {
    return null;
  }
  return isAlive(running.pid) ? running : null;
}

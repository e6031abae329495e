import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import {
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { postgresBinDir } from './private-postgres.ts';
import { repoRoot } from './processes.ts';

const run = promisify(execFile);

/**
 * A Patroni cluster on loopback for the failover drill: one etcd member, PostgreSQL
 * nodes under Patroni rendered from deploy/patroni/patroni.yml, and HAProxy from
 * deploy/patroni/haproxy.cfg routing to the node whose REST API answers /primary.
 * Everything lives in one temporary directory and runs in process groups of its own;
 * stop() kills them all (and any postmaster left behind) even after a failure.
 */
export interface PatroniPorts {
  etcdClient: number;
  etcdPeer: number;
  /** HAProxy's port: the one endpoint Gantry connects to. */
  primary: number;
  postgres: number[];
  rest: number[];
}

export interface PatroniNode {
  name: string;
  pgPort: number;
  restPort: number;
  dataDir: string;
  configFile: string;
}

export interface PatroniCluster {
  scope: string;
  nodes: PatroniNode[];
  /** postgresql:// URL of a database through HAProxy. */
  url(database: string): string;
  /** The name of the node that answers /primary with 200 (null when none does). */
  primary(): Promise<string | null>;
  /** Member states from a node's GET /cluster (name → role and state). */
  members(): Promise<Array<{ name: string; role: string; state: string; lag?: number | string }>>;
  /** Waits until one node is the leader and another its synchronous standby, streaming. */
  waitHealthy(timeoutMs?: number): Promise<{ leader: string; sync: string }>;
  /** The postmaster's pid of a node (from postmaster.pid), or null. */
  postmasterPid(node: string): number | null;
  /** SIGKILL of a node's Patroni and of its postmaster: the node is lost. */
  killNode(node: string): Promise<void>;
  /** Starts a node's Patroni again (it rejoins as a replica, rewound if it must be). */
  startNode(node: string): Promise<void>;
  /** `patronictl switchover` from the leader to a candidate, as an operator runs it. */
  switchover(leader: string, candidate: string): Promise<string>;
  /** The tail of a node's Patroni log. */
  log(node: string): string;
  /** Stops everything and removes the directory. */
  stop(): Promise<void>;
}

/** The drill's fixed loopback ports (55520–55559), probed free before anything starts. */
export const DRILL_PATRONI_PORTS: PatroniPorts = {
  etcdClient: 55520,
  etcdPeer: 55521,
  primary: 55550,
  postgres: [55530, 55531],
  rest: [55540, 55541],
};

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Whether patroni, etcd, haproxy and PostgreSQL's binaries are installed. */
export function patroniAvailable(): boolean {
  return (
    postgresBinDir() !== null &&
    ['patroni', 'patronictl', 'etcd', 'haproxy'].every((tool) => {
      try {
        execFileSync('which', [tool], { stdio: 'ignore' });
        return true;
      } catch {
        return false;
      }
    })
  );
}

function render(template: string, values: Record<string, string | number>): string {
  return template.replace(/\{\{([A-Z_]+)\}\}/g, (_, name: string) => {
    if (!(name in values)) throw new Error(`no value for {{${name}}}`);
    return String(values[name]);
  });
}

export async function startPatroniCluster(ports: PatroniPorts = DRILL_PATRONI_PORTS): Promise<PatroniCluster> {
  const bin = postgresBinDir();
  if (!bin) throw new Error('no PostgreSQL binaries found');
  const all = [ports.etcdClient, ports.etcdPeer, ports.primary, ...ports.postgres, ...ports.rest];
  const busy = [];
  for (const port of all) if (!(await portFree(port))) busy.push(port);
  if (busy.length > 0) throw new Error(`ports in use: ${busy.join(', ')} (a previous drill left something behind?)`);

  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gantry-patroni-'));
  const owner = asRoot
    ? {
        uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim()),
        gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim()),
      }
    : null;
  const ownDir = (target: string) => {
    mkdirSync(target, { recursive: true, mode: 0o700 });
    if (owner) chownSync(target, owner.uid, owner.gid);
  };
  ownDir(dir);
  // PostgreSQL refuses to run as root: as root, every process runs as `postgres`.
  const command = (file: string, args: string[]) =>
    asRoot ? { file: 'runuser', args: ['-u', 'postgres', '--', file, ...args] } : { file, args };

  const children = new Map<string, ChildProcess>();
  const launch = (name: string, file: string, args: string[]) => {
    const logFile = path.join(dir, `${name}.log`);
    const { file: exe, args: argv } = command(file, args);
    const out = openSync(logFile, 'a');
    // detached: a process group of its own, so stop() reaches every child it forks.
    const child = spawn(exe, argv, { cwd: dir, detached: true, stdio: ['ignore', out, out] });
    closeSync(out);
    children.set(name, child);
    return child;
  };

  const scope = `gantry-drill-${process.pid}`;
  const nodes: PatroniNode[] = ports.postgres.map((pgPort, index) => ({
    name: `node${index + 1}`,
    pgPort,
    restPort: ports.rest[index]!,
    dataDir: path.join(dir, `node${index + 1}`, 'data'),
    configFile: path.join(dir, `node${index + 1}.yml`),
  }));
  const template = readFileSync(path.join(repoRoot, 'deploy/patroni/patroni.yml'), 'utf8');
  for (const node of nodes) {
    ownDir(path.dirname(node.dataDir));
    const config = render(template, {
      SCOPE: scope,
      NODE_NAME: node.name,
      NODE_HOST: '127.0.0.1',
      REST_PORT: node.restPort,
      ETCD_HOSTS: `127.0.0.1:${ports.etcdClient}`,
      TTL: 10,
      LOOP_WAIT: 2,
      RETRY_TIMEOUT: 4,
      // The drill keeps no archive; the restore drill exercises pgBackRest.
      ARCHIVE_COMMAND: '/bin/true',
      PG_PORT: node.pgPort,
      DATA_DIR: node.dataDir,
      PG_BIN: bin,
      PGPASS: path.join(path.dirname(node.dataDir), 'pgpass'),
      SUPERUSER_PASSWORD: 'drill-superuser',
      REPLICATION_PASSWORD: 'drill-replicator',
      SOCKET_DIR: path.dirname(node.dataDir),
      CLIENT_NETWORK: '127.0.0.1/32',
      AUTH_METHOD: 'trust',
    });
    writeFileSync(node.configFile, config);
    if (owner) chownSync(node.configFile, owner.uid, owner.gid);
  }
  const haproxyConfig = path.join(dir, 'haproxy.cfg');
  writeFileSync(
    haproxyConfig,
    render(readFileSync(path.join(repoRoot, 'deploy/patroni/haproxy.cfg'), 'utf8'), {
      LISTEN_HOST: '127.0.0.1',
      PRIMARY_PORT: ports.primary,
      CHECK_INTERVAL: '1s',
      CHECK_FALL: 2,
      CHECK_RISE: 1,
      SERVERS: nodes
        .map((node) => `    server ${node.name} 127.0.0.1:${node.pgPort} maxconn 300 check port ${node.restPort}`)
        .join('\n'),
    }),
  );

  const killGroup = (name: string, signal: NodeJS.Signals) => {
    const child = children.get(name);
    if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
    try {
      process.kill(-child.pid, signal);
    } catch {
      // already gone
    }
  };
  const exited = (name: string) =>
    new Promise<void>((resolve) => {
      const child = children.get(name);
      if (!child || child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('exit', () => resolve());
    });
  const postmasterPid = (node: string): number | null => {
    const file = path.join(nodes.find((entry) => entry.name === node)!.dataDir, 'postmaster.pid');
    if (!existsSync(file)) return null;
    const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
    if (!Number.isInteger(pid) || pid <= 0) return null;
    try {
      process.kill(pid, 0);
      return pid;
    } catch {
      return null;
    }
  };
  const restGet = async (port: number, resource: string) =>
    fetch(`http://127.0.0.1:${port}/${resource}`, { signal: AbortSignal.timeout(2000) }).then(
      async (response) => ({ status: response.status, body: (await response.json().catch(() => null)) as any }),
      () => ({ status: 0, body: null }),
    );

  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    // Patroni stops its PostgreSQL on SIGTERM; whatever is left gets SIGKILL.
    for (const node of nodes) killGroup(node.name, 'SIGTERM');
    await Promise.race([Promise.all(nodes.map((node) => exited(node.name))), sleep(20_000)]);
    for (const name of children.keys()) killGroup(name, 'SIGKILL');
    for (const node of nodes) {
      const pid = postmasterPid(node.name);
      if (pid !== null) process.kill(pid, 'SIGKILL');
    }
    await Promise.race([Promise.all([...children.keys()].map(exited)), sleep(10_000)]);
    // A postmaster's children end once they see it gone.
    await sleep(500);
    if (process.env.DRILL_KEEP !== '1') rmSync(dir, { recursive: true, force: true });
  };

  const startNode = async (name: string) => {
    const node = nodes.find((entry) => entry.name === name)!;
    launch(name, 'patroni', [node.configFile]);
  };

  try {
    const etcdData = path.join(dir, 'etcd');
    ownDir(etcdData);
    launch('etcd', 'etcd', [
      '--name=drill',
      `--data-dir=${etcdData}`,
      `--listen-client-urls=http://127.0.0.1:${ports.etcdClient}`,
      `--advertise-client-urls=http://127.0.0.1:${ports.etcdClient}`,
      `--listen-peer-urls=http://127.0.0.1:${ports.etcdPeer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${ports.etcdPeer}`,
      `--initial-cluster=drill=http://127.0.0.1:${ports.etcdPeer}`,
      '--initial-cluster-state=new',
    ]);
    await until('etcd answering /health', 60_000, async () => {
      const health = await fetch(`http://127.0.0.1:${ports.etcdClient}/health`).then(
        (response) => response.json() as Promise<{ health?: string }>,
        () => null,
      );
      return health?.health === 'true';
    });
    // The first node bootstraps the cluster; the others clone it once it leads.
    await startNode(nodes[0]!.name);
    await until(`${nodes[0]!.name} leading`, 180_000, async () => {
      return (await restGet(nodes[0]!.restPort, 'primary')).status === 200;
    });
    for (const node of nodes.slice(1)) await startNode(node.name);
    launch('haproxy', 'haproxy', ['-f', haproxyConfig, '-db']);
  } catch (error) {
    await stop();
    throw error;
  }

  const members: PatroniCluster['members'] = async () => {
    for (const node of nodes) {
      const answer = await restGet(node.restPort, 'cluster');
      if (answer.status === 200 && Array.isArray(answer.body?.members)) return answer.body.members;
    }
    return [];
  };
  const cluster: PatroniCluster = {
    scope,
    nodes,
    url: (database) => `postgresql://postgres@127.0.0.1:${ports.primary}/${database}`,
    async primary() {
      for (const node of nodes) if ((await restGet(node.restPort, 'primary')).status === 200) return node.name;
      return null;
    },
    members,
    async waitHealthy(timeoutMs = 180_000) {
      let found: { leader: string; sync: string } | null = null;
      await until('a leader and a streaming synchronous standby', timeoutMs, async () => {
        const list = await members();
        const leader = list.find((member) => member.role === 'leader' && member.state === 'running');
        const sync = list.find(
          (member) => member.role === 'sync_standby' && ['running', 'streaming'].includes(member.state),
        );
        found = leader && sync ? { leader: leader.name, sync: sync.name } : null;
        return found !== null;
      });
      return found!;
    },
    postmasterPid,
    async killNode(name) {
      const pid = postmasterPid(name);
      killGroup(name, 'SIGKILL');
      if (pid !== null) process.kill(pid, 'SIGKILL');
      await exited(name);
    },
    startNode,
    async switchover(leader, candidate) {
      const { file, args } = command('patronictl', [
        '-c',
        nodes[0]!.configFile,
        'switchover',
        '--leader',
        leader,
        '--candidate',
        candidate,
        '--force',
      ]);
      const { stdout } = await run(file, args, { cwd: dir });
      return stdout;
    },
    log: (name) => {
      try {
        return readFileSync(path.join(dir, `${name}.log`), 'utf8').slice(-4000);
      } catch {
        return '';
      }
    },
    stop,
  };
  return cluster;
}

async function until(what: string, timeoutMs: number, predicate: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(250);
  }
}

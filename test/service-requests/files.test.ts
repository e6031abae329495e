import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import http from 'node:http';
import { once as onceEvent } from 'node:events';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { createRequest, outboxEvents, startWorld, type Body, type ServiceRequestWorld } from './support.ts';

const MiB = 1024 * 1024;

const UPLOAD_LIMIT = 48 * MiB;
const execFileAsync = promisify(execFile);
const clientScript = fileURLToPath(new URL('./large-file-client.ts', import.meta.url));

// Chunks already written and read are garbage until the collector runs, which can be
// many MiB later; the memory sampler collects before it reads RSS, so it measures what
// the process holds.
v8.setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as (options: { type: 'major'; execution: 'sync' }) => void;

let world: ServiceRequestWorld;
let tenantKey: string;
let acmeKey: string;
let fileStorage: 'disk' | 'database';

interface Part {
  name: string;
  filename?: string;
  contentType?: string;
  /** The part's content, produced chunk by chunk. */
  chunks: () => AsyncIterable<Uint8Array>;
}

async function* once(bytes: Uint8Array | string): AsyncIterable<Uint8Array> {
  yield typeof bytes === 'string' ? new TextEncoder().encode(bytes) : bytes;
}

/** A multipart/form-data body produced part by part, never assembled in memory. */
function multipart(parts: Part[]): { chunks: AsyncIterable<Uint8Array>; contentType: string } {
  const boundary = `----gantry-test-${randomBytes(8).toString('hex')}`;
  const encoder = new TextEncoder();
  async function* generate(): AsyncIterable<Uint8Array> {
    for (const part of parts) {
      let head = `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"`;
      if (part.filename !== undefined) head += `; filename="${part.filename}"`;
      head += '\r\n';
      if (part.contentType) head += `Content-Type: ${part.contentType}\r\n`;
      yield encoder.encode(`${head}\r\n`);
      yield* part.chunks();
      yield encoder.encode('\r\n');
    }
    yield encoder.encode(`--${boundary}--\r\n`);
  }
  return { chunks: generate(), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** POSTs a multipart upload with node:http, chunk by chunk with backpressure; stops sending once answered. */
function upload(
  api: TestApi,
  key: string,
  requestId: string,
  parts: Part[],
): Promise<{ status: number; body: Body; headers: http.IncomingHttpHeaders }> {
  const { chunks, contentType } = multipart(parts);
  return new Promise((resolve, reject) => {
    let answered = false;
    const request = http.request(
      `${api.url}/api/external/v1/service-requests/${requestId}/files`,
      { method: 'POST', headers: { 'X-API-Key': key, 'Content-Type': contentType } },
      (response) => {
        answered = true;
        const received: Buffer[] = [];
        response.on('data', (chunk: Buffer) => received.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            body: JSON.parse(Buffer.concat(received).toString('utf8')),
            headers: response.headers,
          }),
        );
        response.on('error', reject);
      },
    );
    request.on('error', (error) => {
      if (!answered) reject(error);
    });
    void (async () => {
      for await (const chunk of chunks) {
        if (answered || request.destroyed) break;
        if (!request.write(chunk)) await onceEvent(request, 'drain');
      }
      request.end();
    })().catch((error: unknown) => request.destroy(error as Error));
  });
}

/** `size` bytes of varied content in 1 MiB chunks, hashed as they are produced. */
function generatedFile(size: number): { chunks: () => AsyncIterable<Uint8Array>; sha256: () => string } {
  const hash = createHash('sha256');
  const block = randomBytes(MiB);
  return {
    async *chunks() {
      for (let sent = 0, index = 0; sent < size; index += 1) {
        const length = Math.min(MiB, size - sent);
        const chunk = Buffer.from(block.subarray(0, length));
        if (length >= 4) chunk.writeUInt32BE(index, 0);
        hash.update(chunk);
        sent += length;
        yield chunk;
      }
    },
    sha256: () => hash.digest('hex'),
  };
}

/** Every object in the file storage, partial ones included (to prove nothing is left behind). */
async function storedFiles(): Promise<string[]> {
  if (fileStorage === 'database') {
    const { rows } = await world.db.pool.query<{ key: string }>('SELECT key FROM stored_files ORDER BY key');
    return rows.map((row) => row.key);
  }
  const root = path.join(world.dataDir, 'files');
  if (!existsSync(root)) return [];
  return (readdirSync(root, { recursive: true }) as string[]).filter((entry) =>
    statSync(path.join(root, entry)).isFile(),
  );
}

/** The stored bytes of a key, or null when the storage has none. */
async function storedBytes(key: string): Promise<Buffer | null> {
  if (fileStorage === 'database') {
    const { rows } = await world.db.pool.query<{ bytes: Buffer | null; files: number }>(
      `SELECT string_agg(c.bytes, ''::bytea ORDER BY c.seq) AS bytes, count(DISTINCT f.id)::int AS files
         FROM stored_files f LEFT JOIN stored_file_chunks c ON c.file_id = f.id
        WHERE f.key = $1 AND f.completed_at IS NOT NULL`,
      [key],
    );
    return rows[0]!.files === 0 ? null : (rows[0]!.bytes ?? Buffer.alloc(0));
  }
  const onDisk = path.join(world.dataDir, 'files', key);
  return existsSync(onDisk) ? readFileSync(onDisk) : null;
}

// A minimal PNG: signature and IHDR chunk are what content detection reads.
const png = Buffer.concat([
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  Buffer.from('0000000d49484452000000010000000108060000001f15c489', 'hex'),
  Buffer.from('0000000a49444154789c6300010000050001', 'hex'),
]);

// Every behaviour holds with the files on the local disk and in the database.
describe.each(['disk', 'database'] as const)('service request files (%s storage)', (storage) => {
  beforeAll(async () => {
    fileStorage = storage;
    world = await startWorld(`service_request_files_${storage}`, ['Acme', 'Globex'], {
      GANTRY_MAX_UPLOAD_BYTES: String(UPLOAD_LIMIT),
      GANTRY_FILE_STORAGE: storage,
    });
    tenantKey = world.tenant.tenantKey;
    acmeKey = world.tenant.customerKeys.Acme!;
  });
  afterAll(async () => {
    await world?.close();
  });

  it('uploads, lists, downloads with the detected content type, and deletes a file, with history and one event each', async () => {
    const request = await createRequest(world, tenantKey, { title: 'Dented door panel' });
    const uploaded = await upload(world.api, tenantKey, request.id, [
      { name: 'note', chunks: () => once('ignored form field') },
      { name: 'file', filename: '../../etc/Door photo (1).png', contentType: 'text/plain', chunks: () => once(png) },
    ]);
    expect(uploaded.status, JSON.stringify(uploaded.body)).toBe(201);
    expect(uploaded.body).toEqual({
      id: expect.any(String),
      filename: 'Door_photo_1_.png',
      mimeType: 'image/png',
      sizeBytes: png.length,
      sha256: createHash('sha256').update(png).digest('hex'),
    });
    expect(uploaded.headers.location).toBe(`/api/external/v1/service-requests/${request.id}/files/${uploaded.body.id}`);

    const text = await upload(world.api, tenantKey, request.id, [
      {
        name: 'file',
        filename: 'notes.txt',
        contentType: 'text/plain; charset=utf-8',
        chunks: () => once('Panel dented at the lower hinge\n'),
      },
    ]);
    expect(text.body).toMatchObject({ filename: 'notes.txt', mimeType: 'text/plain', sizeBytes: 32 });

    const list = await json(await world.api.external(`/service-requests/${request.id}/files`, tenantKey));
    expect(list.items).toEqual([
      expect.objectContaining({
        id: uploaded.body.id,
        filename: 'Door photo (1).png',
        mimeType: 'image/png',
        sizeBytes: png.length,
        source: 'external',
      }),
      expect.objectContaining({ id: text.body.id, filename: 'notes.txt', mimeType: 'text/plain', sizeBytes: 32 }),
    ]);

    const download = await world.api.external(`/service-requests/${request.id}/files/${uploaded.body.id}`, tenantKey);
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toBe('image/png');
    expect(download.headers.get('content-length')).toBe(String(png.length));
    expect(download.headers.get('content-disposition')).toBe(
      `attachment; filename="Door_photo_1_.png"; filename*=UTF-8''Door%20photo%20%281%29.png`,
    );
    expect(Buffer.from(await download.arrayBuffer()).equals(png)).toBe(true);
    const textDownload = await world.api.external(`/service-requests/${request.id}/files/${text.body.id}`, tenantKey);
    expect(textDownload.headers.get('content-type')).toBe('text/plain');
    expect(await textDownload.text()).toBe('Panel dented at the lower hinge\n');

    // The bytes live in the configured storage, under the file's key.
    const key = `${world.tenant.tenantId}/${request.id}/${uploaded.body.id}`;
    expect((await storedBytes(key))?.equals(png)).toBe(true);

    const withFiles = await json(await world.api.external(`/service-requests/${request.id}`, tenantKey));
    expect(withFiles.files.map((file: Body) => file.id)).toEqual([uploaded.body.id, text.body.id]);
    expect(withFiles.history.map((entry: Body) => entry.type)).toEqual(['created', 'file_added', 'file_added']);

    const deleted = await world.api.external(`/service-requests/${request.id}/files/${uploaded.body.id}`, tenantKey, {
      method: 'DELETE',
    });
    expect(await json(deleted)).toEqual({ id: uploaded.body.id, deleted: true });
    expect(await storedBytes(key)).toBeNull();
    expect(
      (await world.api.external(`/service-requests/${request.id}/files/${uploaded.body.id}`, tenantKey)).status,
    ).toBe(404);
    expect(
      (
        await world.api.external(`/service-requests/${request.id}/files/${uploaded.body.id}`, tenantKey, {
          method: 'DELETE',
        })
      ).status,
    ).toBe(404);
    const after = await json(await world.api.external(`/service-requests/${request.id}`, tenantKey));
    expect(after.files.map((file: Body) => file.id)).toEqual([text.body.id]);
    expect(after.history.at(-1)).toMatchObject({ type: 'file_deleted', message: 'deleted file Door photo (1).png' });

    const events = await outboxEvents(world, request.id);
    expect(events.map((event) => event.event_type)).toEqual([
      'service_request.created',
      'service_request.updated',
      'service_request.updated',
      'service_request.updated',
    ]);
    expect(events[1]!.data.changes.fileAdded).toMatchObject({ id: uploaded.body.id, mimeType: 'image/png' });
    expect(events[3]!.data.changes.fileDeleted).toMatchObject({ id: uploaded.body.id });
  });

  it('streams a large file through without holding it in memory, and streams it back', async () => {
    const request = await createRequest(world, tenantKey, { title: 'Full inspection video' });
    // Warm up the upload and download paths so first-use allocations do not count.
    const warm = await upload(world.api, tenantKey, request.id, [
      { name: 'file', filename: 'warm.bin', chunks: () => once(randomBytes(MiB)) },
    ]);
    await (await world.api.external(`/service-requests/${request.id}/files/${warm.body.id}`, tenantKey)).arrayBuffer();

    const size = 40 * MiB;
    collectGarbage({ type: 'major', execution: 'sync' });
    const baseline = process.memoryUsage().rss;
    let peakRaw = baseline;
    let peakHeld = baseline;
    const sampler = setInterval(() => {
      peakRaw = Math.max(peakRaw, process.memoryUsage().rss);
      collectGarbage({ type: 'major', execution: 'sync' });
      peakHeld = Math.max(peakHeld, process.memoryUsage().rss);
    }, 20);
    let output: string;
    try {
      // The client runs in a process of its own: this process's memory is the API's.
      const { stdout } = await execFileAsync(
        process.execPath,
        ['--import', 'tsx', clientScript, world.api.url, tenantKey, request.id, String(size)],
        {
          maxBuffer: MiB,
        },
      );
      output = stdout;
    } finally {
      clearInterval(sampler);
    }
    const result = JSON.parse(output) as { upload: { status: number; body: Body; sha256: string }; download: Body };
    const growth = peakHeld - baseline;
    console.log(
      `large file: ${size / MiB} MiB uploaded and downloaded; API process peak RSS growth ` +
        `${(growth / MiB).toFixed(1)} MiB held, ${((peakRaw - baseline) / MiB).toFixed(1)} MiB before collecting garbage`,
    );

    expect(result.upload.status, JSON.stringify(result.upload.body)).toBe(201);
    expect(result.upload.body).toMatchObject({
      sizeBytes: size,
      sha256: result.upload.sha256,
      mimeType: 'application/octet-stream',
    });
    expect(result.download).toEqual({ status: 200, sizeBytes: size, sha256: result.upload.sha256 });
    // Holding the file would add at least its size; streaming holds a few buffers only (a few
    // MiB on disk; the database path's driver buffers and chunk rows measured 10–14 MiB on a
    // loaded machine, so the bound is half the file: still far below holding it whole).
    expect(growth).toBeLessThan(size / 2);
  });

  it('refuses a file over the upload limit with 413, streamed or announced, leaving nothing behind', async () => {
    const request = await createRequest(world, tenantKey, { title: 'Too big' });
    const filesBefore = await storedFiles();
    const eventsBefore = (await outboxEvents(world, request.id)).length;

    // Streamed without a length: refused once the limit is passed.
    const streamed = await upload(world.api, tenantKey, request.id, [
      { name: 'file', filename: 'huge.bin', chunks: generatedFile(UPLOAD_LIMIT + 1).chunks },
    ]);
    expect(streamed.status).toBe(413);
    expect(streamed.body).toEqual({
      error: `the file is larger than the upload limit of ${UPLOAD_LIMIT} bytes`,
      code: 'file_too_large',
    });

    // With the default limit (25 MiB) and a Content-Length beyond it: refused before reading.
    const defaults = await startTestApi(world.db.pool, world.db.url, {
      GANTRY_DATA_DIR: world.dataDir,
      GANTRY_FILE_STORAGE: fileStorage,
    });
    try {
      const boundary = 'gantry-boundary';
      const blob = new Blob([
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n\r\n`,
        new Uint8Array(25 * MiB + 1),
        `\r\n--${boundary}--\r\n`,
      ]);
      const response = await defaults.external(`/service-requests/${request.id}/files`, tenantKey, {
        method: 'POST',
        headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}` },
        body: blob,
      });
      expect(response.status).toBe(413);
      expect(await json(response)).toMatchObject({ code: 'file_too_large' });
    } finally {
      await defaults.close();
    }

    expect(await storedFiles()).toEqual(filesBefore);
    expect((await json(await world.api.external(`/service-requests/${request.id}/files`, tenantKey))).items).toEqual(
      [],
    );
    expect((await outboxEvents(world, request.id)).length).toBe(eventsBefore);
  });

  it('refuses uploads without a file part, with two files, or not as multipart (400), storing nothing', async () => {
    const request = await createRequest(world, tenantKey, { title: 'Bad uploads' });
    const filesBefore = await storedFiles();

    const missing = await upload(world.api, tenantKey, request.id, [
      { name: 'attachment', filename: 'a.txt', chunks: () => once('a') },
    ]);
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({ code: 'missing_file' });
    expect(missing.body.error).toContain('"file"');

    const two = await upload(world.api, tenantKey, request.id, [
      { name: 'file', filename: 'a.txt', chunks: () => once('a') },
      { name: 'file', filename: 'b.txt', chunks: () => once('b') },
    ]);
    expect(two.status).toBe(400);
    expect(two.body).toMatchObject({ code: 'too_many_files' });

    const asJson = await world.api.external(`/service-requests/${request.id}/files`, tenantKey, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ file: 'abc' }),
    });
    expect(asJson.status).toBe(415);
    expect(await json(asJson)).toMatchObject({ code: 'invalid_content_type' });

    const garbled = await world.api.external(`/service-requests/${request.id}/files`, tenantKey, {
      method: 'POST',
      headers: { 'Content-Type': 'multipart/form-data; boundary=xyz' },
      body: 'this is not multipart at all',
    });
    expect(garbled.status).toBe(400);

    // Bodies that end in the middle of a part, skipped or not.
    for (const name of ['other', 'file']) {
      const truncated = await world.api.external(`/service-requests/${request.id}/files`, tenantKey, {
        method: 'POST',
        headers: { 'Content-Type': 'multipart/form-data; boundary=cut' },
        body: `--cut\r\nContent-Disposition: form-data; name="${name}"; filename="cut.txt"\r\n\r\nthe body stops here`,
      });
      expect(truncated.status, name).toBe(400);
      expect(await json(truncated)).toMatchObject({ code: 'invalid_multipart' });
    }

    expect(await storedFiles()).toEqual(filesBefore);
    expect((await json(await world.api.external(`/service-requests/${request.id}/files`, tenantKey))).items).toEqual(
      [],
    );
    expect((await outboxEvents(world, request.id)).length).toBe(1);
  });

  it('keeps files inside the customer scope: another customer’s key gets 404 on upload, list, download and delete', async () => {
    const globex = await createRequest(world, tenantKey, { title: 'Globex only', customerName: 'Globex' });
    const file = await upload(world.api, tenantKey, globex.id, [
      { name: 'file', filename: 'g.txt', chunks: () => once('globex') },
    ]);
    expect(file.status).toBe(201);

    expect(
      (await upload(world.api, acmeKey, globex.id, [{ name: 'file', filename: 'a.txt', chunks: () => once('acme') }]))
        .status,
    ).toBe(404);
    expect((await world.api.external(`/service-requests/${globex.id}/files`, acmeKey)).status).toBe(404);
    expect((await world.api.external(`/service-requests/${globex.id}/files/${file.body.id}`, acmeKey)).status).toBe(
      404,
    );
    expect(
      (await world.api.external(`/service-requests/${globex.id}/files/${file.body.id}`, acmeKey, { method: 'DELETE' }))
        .status,
    ).toBe(404);
    expect((await world.api.external(`/service-requests/${globex.id}/files/${file.body.id}`, tenantKey)).status).toBe(
      200,
    );

    // A customer key works on its own requests, recorded as a customer upload.
    const own = await createRequest(world, acmeKey, { title: 'Acme photo' });
    const mine = await upload(world.api, acmeKey, own.id, [
      { name: 'file', filename: 'mine.txt', chunks: () => once('acme') },
    ]);
    expect(mine.status).toBe(201);
    const list = await json(await world.api.external(`/service-requests/${own.id}/files`, acmeKey));
    expect(list.items).toEqual([expect.objectContaining({ id: mine.body.id, source: 'customer' })]);
    // A file id of another request is not found under this one.
    expect((await world.api.external(`/service-requests/${own.id}/files/${file.body.id}`, acmeKey)).status).toBe(404);
  });
});

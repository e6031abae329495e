import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';

// A client in its own process for the large-file test: it streams a generated file of
// the given size up as multipart/form-data, downloads it again, and prints what it sent
// and received as JSON, so the test can watch the API process's memory alone.

const [baseUrl, key, requestId, sizeArg] = process.argv.slice(2);
const size = Number(sizeArg);
const MiB = 1024 * 1024;
const boundary = `----gantry-large-${randomBytes(8).toString('hex')}`;

async function uploadFile(): Promise<{ status: number; body: unknown; sha256: string }> {
  const hash = createHash('sha256');
  const block = randomBytes(MiB);
  const request = http.request(`${baseUrl}/api/external/v1/service-requests/${requestId}/files`, {
    method: 'POST',
    headers: { 'X-API-Key': key, 'Content-Type': `multipart/form-data; boundary=${boundary}` },
  });
  const answered = once(request, 'response') as Promise<[http.IncomingMessage]>;
  const write = async (chunk: Buffer) => {
    if (!request.write(chunk)) await once(request, 'drain');
  };
  await write(
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="large.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
    ),
  );
  for (let sent = 0, index = 0; sent < size; index += 1) {
    const chunk = Buffer.from(block.subarray(0, Math.min(MiB, size - sent)));
    if (chunk.length >= 4) chunk.writeUInt32BE(index, 0);
    hash.update(chunk);
    sent += chunk.length;
    await write(chunk);
  }
  await write(Buffer.from(`\r\n--${boundary}--\r\n`));
  request.end();
  const [response] = await answered;
  const parts: Buffer[] = [];
  for await (const part of response) parts.push(part as Buffer);
  return {
    status: response.statusCode ?? 0,
    body: JSON.parse(Buffer.concat(parts).toString('utf8')),
    sha256: hash.digest('hex'),
  };
}

async function downloadFile(fileId: string): Promise<{ status: number; sizeBytes: number; sha256: string }> {
  const request = http.get(`${baseUrl}/api/external/v1/service-requests/${requestId}/files/${fileId}`, {
    headers: { 'X-API-Key': key },
  });
  const [response] = (await once(request, 'response')) as [http.IncomingMessage];
  const hash = createHash('sha256');
  let sizeBytes = 0;
  for await (const chunk of response) {
    hash.update(chunk as Buffer);
    sizeBytes += (chunk as Buffer).length;
  }
  return { status: response.statusCode ?? 0, sizeBytes, sha256: hash.digest('hex') };
}

const upload = await uploadFile();
const fileId = (upload.body as { id?: string }).id;
const download = fileId ? await downloadFile(fileId) : null;
process.stdout.write(JSON.stringify({ upload, download }));

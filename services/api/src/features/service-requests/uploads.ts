import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import busboy from 'busboy';
import { fileTypeFromBuffer } from 'file-type';
import { PayloadTooLargeError, ValidationError } from '../../errors.ts';

// Multipart uploads, streamed: busboy splits the body, the file part flows through an
// inspector (size limit, SHA-256, the first bytes for type detection) into storage.
// Nothing but the inspected head (64 KiB) is ever held in memory.

/** Bytes kept from the start of a file to tell its type. */
const HEAD_BYTES = 64 * 1024;
/** What a multipart body may carry beyond the file itself (boundaries, part headers). */
export const MULTIPART_OVERHEAD_BYTES = 64 * 1024;

export interface IncomingFile {
  /** The part's bytes, already passed through the inspector (size-limited). */
  stream: Readable;
  /** The original name, sanitised for display (no path, no control characters). */
  filename: string;
  /** A file-system-safe name derived from it. */
  storedName: string;
  declaredMimeType: string;
  /** Filled once the stream has ended. */
  inspection: FileInspection;
}

export interface FileInspection {
  sizeBytes: number;
  sha256: string;
  head: Buffer;
}

/** Counts, hashes and keeps the head of what flows through; errors with 413 past the limit. */
class FileInspector extends Transform {
  readonly result: FileInspection = { sizeBytes: 0, sha256: '', head: Buffer.alloc(0) };
  private readonly hash = createHash('sha256');
  private readonly headChunks: Buffer[] = [];
  private headLength = 0;

  constructor(private readonly maxBytes: number) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.result.sizeBytes += chunk.length;
    if (this.result.sizeBytes > this.maxBytes) {
      callback(tooLarge(this.maxBytes));
      return;
    }
    this.hash.update(chunk);
    if (this.headLength < HEAD_BYTES) {
      const part = chunk.subarray(0, HEAD_BYTES - this.headLength);
      this.headChunks.push(Buffer.from(part));
      this.headLength += part.length;
    }
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    this.result.sha256 = this.hash.digest('hex');
    this.result.head = Buffer.concat(this.headChunks);
    callback();
  }
}

export function tooLarge(maxBytes: number): PayloadTooLargeError {
  return new PayloadTooLargeError(`the file is larger than the upload limit of ${maxBytes} bytes`, 'file_too_large');
}

/** The original name for display: last path segment, no control characters, at most 255 characters. */
export function displayFilename(raw: string | undefined): string {
  const base = path.posix.basename((raw ?? '').replace(/\\/g, '/'));
  // eslint-disable-next-line no-control-regex
  const clean = base
    .normalize('NFC')
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is removed
    .replace(/[\u0000-\u001f\u007f-\u009f]/g, '')
    .trim()
    .slice(0, 255);
  return clean === '' || clean === '.' || clean === '..' ? 'file' : clean;
}

/** A name safe on any file system and in a header: [A-Za-z0-9._-], no leading dot, extension kept. */
export function storedFilename(display: string): string {
  const ascii = display.normalize('NFKD').replace(/[\u0300-\u036f]/g, '');
  const safe = ascii
    .replace(/[^A-Za-z0-9._-]+/g, '_')
    .replace(/_+/g, '_')
    .replace(/^[._-]+/, '')
    .slice(-120);
  return safe === '' ? 'file' : safe;
}

const MIME_PATTERN = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/;

/** The type told by the bytes, else the declared one when it is well-formed, else octet-stream. */
export async function detectMimeType(head: Buffer, declared: string): Promise<string> {
  const detected = head.length > 0 ? await fileTypeFromBuffer(head).catch(() => undefined) : undefined;
  if (detected) return detected.mime;
  const normalised = declared.split(';')[0]?.trim().toLowerCase() ?? '';
  return MIME_PATTERN.test(normalised) && normalised !== 'application/x-empty'
    ? normalised
    : 'application/octet-stream';
}

/**
 * The error for a part whose name, filename or value was not UTF-8, or null. busboy
 * decodes them leniently, so such bytes arrive as U+FFFD; a U+FFFD that was really sent
 * cannot be told apart, and is refused as well (a name never needs one).
 */
function illFormedPartText(name: string, text: { filename?: string; value?: string }): ValidationError | null {
  const where = (what: string) => `invalid multipart body: the ${what} of part ${JSON.stringify(name.slice(0, 60))}`;
  const rule = 'must be well-formed UTF-8 text (no invalid bytes, no U+FFFD)';
  if (name.includes('\uFFFD'))
    return new ValidationError(`invalid multipart body: a part name ${rule}`, 'invalid_multipart');
  if (text.filename?.includes('\uFFFD'))
    return new ValidationError(`${where('filename')} ${rule}`, 'invalid_multipart');
  if (text.value?.includes('\uFFFD')) return new ValidationError(`${where('value')} ${rule}`, 'invalid_multipart');
  return null;
}

/**
 * Reads a multipart/form-data request with exactly one file in the part `fieldName`,
 * handing that part to `store` as a stream while it arrives. Other fields are ignored.
 * On any failure the rest of the request is drained (so the client reads the error)
 * and whatever `store` produced is given to `discard` before the promise rejects.
 */
export function receiveSingleFile<T>(
  request: IncomingMessage,
  options: { fieldName: string; maxBytes: number },
  store: (file: IncomingFile) => Promise<T>,
  discard: (stored: T) => Promise<void>,
): Promise<{ file: IncomingFile; stored: T }> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: request.headers,
        // Names and filenames are UTF-8 (what browsers send), not busboy's default Latin-1,
        // which would store "Prüfbericht.pdf" as "PrÃ¼fbericht.pdf".
        defParamCharset: 'utf8',
        limits: { fields: 100, fieldSize: 64 * 1024, parts: 200, headerPairs: 100 },
      });
    } catch (error) {
      reject(new ValidationError(`invalid multipart body: ${(error as Error).message}`, 'invalid_multipart'));
      return;
    }

    let finished = false;
    let extraFiles = 0;
    let upload: { file: IncomingFile; storing: Promise<T> } | null = null;

    const fail = (error: unknown) => {
      if (finished) return;
      finished = true;
      request.unpipe(parser);
      request.resume();
      if (!upload) {
        reject(error);
        return;
      }
      // Answer once storage holds nothing of the upload: a stored file is discarded, one
      // still being written removes itself when its stream is destroyed.
      const discarded = upload.storing.then(discard, () => undefined).catch(() => undefined);
      upload.file.stream.destroy();
      void discarded.then(() => reject(error));
    };

    parser.on('file', (name, partStream, info) => {
      const illFormed = illFormedPartText(name, { filename: info.filename });
      if (illFormed !== null) {
        partStream.on('error', () => undefined);
        partStream.resume();
        fail(illFormed);
        return;
      }
      if (finished || name !== options.fieldName || upload !== null) {
        if (name === options.fieldName && upload !== null) extraFiles += 1;
        // Skipped parts are drained; a broken body is reported by the parser's own error.
        partStream.on('error', () => undefined);
        partStream.resume();
        return;
      }
      const inspector = new FileInspector(options.maxBytes);
      // Errors of the part (client gone, malformed body) reach the consumer through the inspector.
      partStream.on('error', (error) => inspector.destroy(error));
      inspector.on('error', () => partStream.resume());
      partStream.pipe(inspector);
      const filename = displayFilename(info.filename);
      const file: IncomingFile = {
        stream: inspector,
        filename,
        storedName: storedFilename(filename),
        declaredMimeType: info.mimeType,
        inspection: inspector.result,
      };
      const storing = store(file);
      upload = { file, storing };
      storing.catch(fail);
    });

    // Other fields are not kept, but their text is held to the same rule as the file's name.
    parser.on('field', (name, value) => {
      const illFormed = illFormedPartText(name, { value });
      if (illFormed !== null) fail(illFormed);
    });
    parser.on('error', (error: Error) =>
      fail(new ValidationError(`invalid multipart body: ${error.message}`, 'invalid_multipart')),
    );
    request.on('error', (error) => fail(error));
    request.on('aborted', () => fail(new ValidationError('the upload was aborted by the client', 'upload_aborted')));

    parser.on('close', () => {
      if (finished) return;
      if (upload === null) {
        fail(
          new ValidationError(
            `invalid multipart body: the part "${options.fieldName}" with a file is required`,
            'missing_file',
          ),
        );
        return;
      }
      const current = upload;
      current.storing.then(
        (stored) => {
          if (finished) return;
          if (extraFiles > 0) {
            fail(
              new ValidationError(
                `invalid multipart body: send one file per request in the part "${options.fieldName}"`,
                'too_many_files',
              ),
            );
            return;
          }
          finished = true;
          resolve({ file: current.file, stored });
        },
        (error: unknown) => fail(error),
      );
    });

    request.pipe(parser);
  });
}

import { fileURLToPath } from 'node:url';
import path from 'node:path';

/** The repository's db/ folder: migrations, the TimescaleDB layer and gold definitions. */
export const dbDirectory = path.resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../db');

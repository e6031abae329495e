import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fetchServedDocuments } from './served-document.ts';

// Writes the documents the API serves into the folder given (used by `pnpm lint:openapi`,
// which lints them with Redocly and removes the folder).
const folder = process.argv[2];
if (!folder) throw new Error('usage: write-openapi.ts <folder>');
const documents = await fetchServedDocuments();
for (const [name, document] of Object.entries(documents)) {
  writeFileSync(path.join(folder, `${name}.openapi.json`), JSON.stringify(document, null, 2));
}

import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { clientTypesOf, GENERATED_CLIENT_TYPES } from './client-types.ts';
import { fetchServedDocuments } from './served-document.ts';

// `pnpm generate:client`: the generated client's types, from the document the API serves.
const documents = await fetchServedDocuments();
// The folder is not in git (generated files only): a fresh clone has none yet.
mkdirSync(new URL('.', GENERATED_CLIENT_TYPES), { recursive: true });
writeFileSync(GENERATED_CLIENT_TYPES, await clientTypesOf(documents.external));
console.info(`wrote ${fileURLToPath(GENERATED_CLIENT_TYPES)}`);

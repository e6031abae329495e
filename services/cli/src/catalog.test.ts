import { describe, expect, it } from 'vitest';
import { catalog } from './catalog.ts';

describe('the command catalog', () => {
  it('names and summarises each command as the command module itself does', async () => {
    for (const entry of catalog) {
      const command = await entry.load();
      expect({ name: command.name, summary: command.summary }).toEqual({ name: entry.name, summary: entry.summary });
    }
  });
});

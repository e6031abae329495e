import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './index.ts';

describe('loadConfig', () => {
  it('applies the documented defaults', () => {
    const config = loadConfig({});
    expect(config.http.port).toBe(8080);
    expect(config.storageMode).toBe('auto');
    expect(config.dataDir).toBe('./.gantry');
    expect(config.mqtt.embeddedPort).toBe(1883);
    expect(config.fixedPorts).toEqual({ http: false, mqtt: false, embeddedPostgres: false });
    expect(config.webhooks).toMatchObject({
      maxAttempts: 3,
      backoffSeconds: [15, 60],
      timeoutSeconds: 10,
      allowPrivateTargets: false,
    });
    expect(config.databaseUrl).toBeUndefined();
  });

  it('reads values and treats empty variables as unset', () => {
    const config = loadConfig({
      GANTRY_PORT: '9090',
      GANTRY_STORAGE_MODE: 'postgres',
      GANTRY_WEBHOOK_BACKOFF_SECONDS: '1,2,3',
      GANTRY_DATABASE_URL: '',
    });
    expect(config.http.port).toBe(9090);
    expect(config.fixedPorts).toEqual({ http: true, mqtt: false, embeddedPostgres: false });
    expect(config.storageMode).toBe('postgres');
    expect(config.webhooks.backoffSeconds).toEqual([1, 2, 3]);
    expect(config.databaseUrl).toBeUndefined();
  });

  it('keeps files in the database whenever a database is configured, on disk for the embedded default', () => {
    const url = 'postgres://gantry@db.example/gantry';
    expect(loadConfig({}).fileStorage).toBe('disk');
    expect(loadConfig({ GANTRY_DATABASE_URL: url }).fileStorage).toBe('database');
    expect(loadConfig({ GANTRY_DATABASE_URL: url, GANTRY_FILE_STORAGE: 'disk' }).fileStorage).toBe('disk');
    expect(loadConfig({ GANTRY_FILE_STORAGE: 'database' }).fileStorage).toBe('database');
    expect(() => loadConfig({ GANTRY_FILE_STORAGE: 's3' })).toThrow(ConfigError);
  });

  it('takes an empty GANTRY_INGEST_SHARED_GROUP as a plain subscription, not as unset', () => {
    expect(loadConfig({}).ingest.sharedGroup).toBe('gantry-ingest');
    expect(loadConfig({ GANTRY_INGEST_SHARED_GROUP: '' }).ingest.sharedGroup).toBe('');
    expect(loadConfig({ GANTRY_INGEST_SHARED_GROUP: 'ingest-b' }).ingest.sharedGroup).toBe('ingest-b');
  });

  it.each([
    ['GANTRY_PORT', 'eighty'],
    ['GANTRY_PORT', '70000'],
    ['GANTRY_STORAGE_MODE', 'mongodb'],
    ['GANTRY_DATABASE_URL', 'mysql://x'],
    ['GANTRY_MQTT_URL', 'http://broker'],
    ['GANTRY_ADMIN_TOKEN', 'short'],
    ['GANTRY_WEBHOOK_BACKOFF_SECONDS', '15;60'],
    ['GANTRY_WEBHOOK_ALLOW_PRIVATE_TARGETS', 'maybe'],
    ['GANTRY_LOG_LEVEL', 'loud'],
  ])('a bad %s (%s) stops start-up with a message naming it', (name, value) => {
    let caught: unknown;
    try {
      loadConfig({ [name]: value });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as Error).message).toContain(name);
  });

  it('never echoes secrets in its messages', () => {
    expect(() => loadConfig({ GANTRY_ADMIN_TOKEN: 'tiny' })).toThrow(/GANTRY_ADMIN_TOKEN/);
    expect(() => loadConfig({ GANTRY_ADMIN_TOKEN: 'tiny' })).not.toThrow(/tiny/);
  });
});

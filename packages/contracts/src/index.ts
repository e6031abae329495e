export * from './geojson.ts';
export * from './events.ts';
export * from './device-messages.ts';
export * from './webhooks.ts';
export * from './text.ts';

export { createApp, type AppDeps, type App } from './app.ts';
export { startApiServer, type ApiServer } from './server.ts';
export * as provisioning from './features/provisioning/service.ts';
export { provisionDemo, DEMO_TENANT_NAME, DEMO_CUSTOMER_NAME, type DemoResult } from './features/provisioning/demo.ts';
export * as provisioningSchemas from './features/provisioning/schemas.ts';
export * as unknownDevices from './features/provisioning/unknown-devices.service.ts';
export { migrateFilesToDatabase, type FileMigrationSummary } from './storage/migrate-files.ts';
export { importFile, type ImportFormat } from './features/provisioning/import.service.ts';

export { createApp, type AppDeps, type App } from './app.ts';
export { startApiServer, type ApiServer } from './server.ts';
export * as provisioning from './features/provisioning/service.ts';
export { provisionDemo, type DemoResult } from './features/provisioning/demo.ts';

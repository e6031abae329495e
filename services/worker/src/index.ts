export { startWorker, type WorkerDeps, type RunningWorker } from './worker.ts';
export { runLoop, type WorkerLoop } from './loop.ts';

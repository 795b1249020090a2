export { startWorker, pluginContext, type WorkerRole } from './worker.ts';
export { loadProviders, checkPlugin, checkProviderConfig, PluginLoadError, type LoadedProvider } from './provider-loader.ts';
export { decide, sendHandler } from "./send-loop.ts";

export { startWorker, pluginContext, loadConfiguredProviders, type WorkerRole } from './worker.ts';
export {
  loadProviders,
  closeProviders,
  checkPlugin,
  checkProviderConfig,
  PluginLoadError,
  type LoadedProvider,
  type LoadedProviders,
} from './provider-loader.ts';
export { ProviderChain, ChainSendError } from './provider-chain.ts';
export { sendLoop, type SendLoop } from './send-loop.ts';

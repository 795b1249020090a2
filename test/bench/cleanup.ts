import { progress } from './log.ts';

/**
 * Everything the run starts (engines, ENS children, the receiver, temp dirs) registers how to undo
 * itself here. runCleanup() undoes it in reverse order; it runs from run.ts's finally block and
 * from the SIGINT/SIGTERM handler, so an interrupted or failed run leaves no process or directory
 * behind.
 */
interface Entry {
  name: string;
  fn: () => unknown;
}

const stack: Entry[] = [];
let running: Promise<void> | undefined;
let aborted = false;

/** True once the run was interrupted: loads stop early and no phase starts. */
export function isAborted(): boolean {
  return aborted;
}

/** Throws when the run was interrupted; called by waits and phases so nothing new starts. */
export function checkAborted(): void {
  if (aborted) throw new Error('interrupted');
}

/** Registers an undo step; the returned function runs it now (once) and unregisters it. */
export function onCleanup(name: string, fn: () => unknown): () => Promise<void> {
  const entry: Entry = { name, fn };
  stack.push(entry);
  return async () => {
    const i = stack.indexOf(entry);
    if (i < 0) return;
    stack.splice(i, 1);
    await entry.fn();
  };
}

export function runCleanup(): Promise<void> {
  running ??= (async () => {
    while (stack.length > 0) {
      const e = stack.pop()!;
      try {
        await Promise.race([
          Promise.resolve().then(e.fn),
          new Promise((_, rej) =>
            setTimeout(() => rej(new Error('timed out after 30 s')), 30_000).unref(),
          ),
        ]);
      } catch (err) {
        progress(`cleanup: ${e.name} failed: ${(err as Error).message}`);
      }
    }
  })();
  return running;
}

/**
 * SIGINT/SIGTERM: clean up and exit 130. An error nobody caught (say a driver whose server was just
 * stopped under it): clean up and exit 1, or, when cleanup is already under way, note it and let
 * cleanup finish. Either way no engine, ENS process or temp dir is left behind.
 */
export function installSignalHandlers(): void {
  let interrupted = false;
  const handler = (signal: NodeJS.Signals) => {
    if (interrupted) {
      progress(`second ${signal}: exiting without finishing cleanup`);
      process.exit(130);
    }
    interrupted = true;
    aborted = true;
    progress(`${signal}: stopping and cleaning up`);
    void runCleanup().finally(() => process.exit(130));
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  const fatal = (err: unknown) => {
    const text = (err as Error)?.message ?? String(err);
    if (running) {
      progress(`while cleaning up: ${text}`);
      return;
    }
    aborted = true;
    progress(`uncaught error: ${(err as Error)?.stack ?? text}`);
    void runCleanup().finally(() => process.exit(1));
  };
  process.on('uncaughtException', fatal);
  process.on('unhandledRejection', fatal);
}

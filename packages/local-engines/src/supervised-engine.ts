import { EngineStartError, type EngineName } from './engine-errors.ts';
import { describeExit, type EngineProcess } from './engine-process.ts';
import { freePort } from './free-port.ts';

const STOP_GRACE_MS = 10_000;
const PORT_ATTEMPTS = 3;

export interface SuperviseOptions {
  engine: EngineName;
  /** Fixed port; when omitted a free one is picked once and kept across restarts. */
  port?: number;
  /** The engine's graceful-shutdown signal. */
  stopSignal: NodeJS.Signals;
  /** Output that means the port was taken by someone else between freePort() and bind(). */
  portTaken: RegExp;
  /** Starts the engine on `port` and resolves once it serves clients. */
  launch(port: number): Promise<EngineProcess>;
}

export interface SupervisedEngine {
  readonly port: number;
  /** The server's pid while it runs (for fault tests that need to see or signal it directly). */
  readonly pid: number | undefined;
  /** Starts the engine again on the same port; no-op while it runs. */
  start(): Promise<void>;
  /** Graceful shutdown; SIGKILL if it has not exited after 10 s. */
  stop(): Promise<void>;
  /** SIGKILLs the engine and waits for it to exit, to simulate a crash. */
  kill9(): Promise<void>;
}

/**
 * Builds the error for an engine that did not come up, stopping it first if it is
 * merely slow so that a failed start leaves nothing running.
 */
export async function startFailure(
  engine: EngineName,
  label: string,
  server: EngineProcess,
  stopSignal: NodeJS.Signals,
  timeoutMs: number,
): Promise<EngineStartError> {
  const timedOut = server.isRunning();
  if (timedOut) await server.terminate(stopSignal, STOP_GRACE_MS);
  const what = timedOut
    ? `did not accept connections within ${timeoutMs} ms`
    : describeExit(await server.exited);
  return new EngineStartError(engine, `${label} ${what}`, await server.recentOutput());
}

export async function superviseEngine(opts: SuperviseOptions): Promise<SupervisedEngine> {
  let port = opts.port ?? (await freePort());
  let proc: EngineProcess | undefined;
  let starting: Promise<void> | undefined;

  function start(): Promise<void> {
    if (proc?.isRunning() && !starting) return Promise.resolve();
    starting ??= opts
      .launch(port)
      .then((server) => {
        proc = server;
      })
      .finally(() => {
        starting = undefined;
      });
    return starting;
  }

  for (let attempt = 1; ; attempt++) {
    try {
      await start();
      break;
    } catch (err) {
      const portTaken = err instanceof EngineStartError && opts.portTaken.test(err.output);
      // A port the caller chose is theirs to fix; only one we picked may be swapped.
      if (!portTaken || opts.port !== undefined || attempt >= PORT_ATTEMPTS) throw err;
      port = await freePort();
    }
  }

  return {
    get port() {
      return port;
    },
    get pid() {
      return proc?.isRunning() ? proc.pid : undefined;
    },
    start,
    async stop() {
      await starting?.catch(() => {});
      await proc?.terminate(opts.stopSignal, STOP_GRACE_MS);
    },
    async kill9() {
      await starting?.catch(() => {});
      await proc?.terminate('SIGKILL', STOP_GRACE_MS);
    },
  };
}

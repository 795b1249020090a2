import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Readable } from 'node:stream';
import { killOnExit } from './child-cleanup.ts';
import { withParentDeathSignal } from './parent-death-signal.ts';
import type { RunAs } from './service-user.ts';

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process could not be spawned at all. */
  error?: Error;
}

export interface EngineProcessOptions {
  command: string;
  args: readonly string[];
  cwd?: string;
  runAs?: RunAs;
  /** What the engine gets when this process dies: its graceful-shutdown signal. */
  parentDeathSignal: NodeJS.Signals;
  onLog?: (line: string) => void;
}

export interface EngineProcess {
  readonly pid: number | undefined;
  readonly exited: Promise<ExitStatus>;
  isRunning(): boolean;
  /**
   * The last log lines, to explain a failed start. Once the process has exited it
   * waits briefly for the pipes to drain, since 'exit' can arrive before the final lines.
   */
  recentOutput(): Promise<string>;
  /** Sends `signal` and waits for exit, escalating to SIGKILL after `graceMs`. */
  terminate(signal: NodeJS.Signals, graceMs: number): Promise<void>;
}

const KEPT_LINES = 40;

export function describeExit(status: ExitStatus): string {
  if (status.error) return `could not be spawned (${status.error.message})`;
  if (status.signal) return `was killed by ${status.signal}`;
  return `exited with code ${status.code}`;
}

function pipeLines(stream: Readable | null, onLine: (line: string) => void): void {
  if (!stream) return;
  createInterface({ input: stream, crlfDelay: Infinity }).on('line', onLine);
}

export async function spawnEngine(opts: EngineProcessOptions): Promise<EngineProcess> {
  const { command, args } = await withParentDeathSignal(
    opts.command,
    opts.args,
    opts.parentDeathSignal,
  );
  const child: ChildProcess = spawn(command, args, {
    cwd: opts.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    // A process group of its own: a terminal's Ctrl-C signals the foreground group, and an engine
    // in it stopped at once (PostgreSQL's fast shutdown cut every connection) while ENS was still
    // stopping its roles. ENS stops its engines itself, after them; if ENS dies, the parent-death
    // signal and killOnExit still end the engine.
    detached: true,
    ...(opts.runAs ? { uid: opts.runAs.uid, gid: opts.runAs.gid } : {}),
  });
  killOnExit(child);

  const lines: string[] = [];
  const onLine = (line: string) => {
    lines.push(line);
    if (lines.length > KEPT_LINES) lines.shift();
    opts.onLog?.(line);
  };
  pipeLines(child.stdout, onLine);
  pipeLines(child.stderr, onLine);

  // Orphaned children of a killed engine can hold the pipes open, so 'close' may come late or
  // never.
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));

  let running = true;
  const exited = new Promise<ExitStatus>((resolve) => {
    child.once('error', (error) => {
      running = false;
      resolve({ code: null, signal: null, error });
    });
    child.once('exit', (code, signal) => {
      running = false;
      resolve({ code, signal });
    });
  });

  return {
    pid: child.pid,
    exited,
    isRunning: () => running,
    async recentOutput() {
      if (!running) await Promise.race([closed, sleep(250)]);
      return lines.join('\n');
    },
    async terminate(signal, graceMs) {
      if (!running) return;
      child.kill(signal);
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), graceMs);
      });
      const outcome = await Promise.race([exited, timedOut]);
      clearTimeout(timer);
      if (outcome === 'timeout' && running) {
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
}

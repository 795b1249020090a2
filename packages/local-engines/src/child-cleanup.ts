import type { ChildProcess } from 'node:child_process';

const live = new Set<ChildProcess>();
let installed = false;

function killLiveChildren(): void {
  for (const child of live) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    try {
      child.kill('SIGKILL');
    } catch {
      // Already gone: nothing left to clean up.
    }
  }
}

/**
 * Last line of defence for callers that exit without calling stop(): 'exit'
 * handlers must be synchronous, so there is no time for a graceful shutdown and
 * the child is SIGKILLed (startPostgres recovers from that on the next start).
 */
export function killOnExit(child: ChildProcess): void {
  if (!installed) {
    process.on('exit', killLiveChildren);
    installed = true;
  }
  live.add(child);
  const forget = () => live.delete(child);
  child.once('exit', forget);
  child.once('error', forget);
}

import cluster from 'node:cluster';

/*
 * Questions a process of an `ens serve` with ENS_PROCESSES > 1 asks its supervising process
 * (aggregated metrics, rate-limit leases), over node:cluster's IPC channel. One listener per side;
 * each question carries an id its answer repeats.
 */

interface Question {
  type: string;
  id: number;
  payload: unknown;
}
interface Reply {
  type: string;
  id: number;
  value?: unknown;
  error?: string;
}

const asked = (channel: string) => `${channel}?`;
const replied = (channel: string) => `${channel}!`;

let nextId = 0;
const waiting = new Map<
  string,
  { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }
>();
let listening = false;

/** In a child: asks the supervisor on `channel`; rejects after `timeoutMs` without an answer. */
export function askSupervisor<A>(channel: string, payload: unknown, timeoutMs: number): Promise<A> {
  if (!listening) {
    listening = true;
    process.on('message', (m: Reply) => {
      if (typeof m?.type !== 'string' || !m.type.endsWith('!')) return;
      const key = `${m.type} ${m.id}`;
      const w = waiting.get(key);
      if (!w) return;
      waiting.delete(key);
      clearTimeout(w.timer);
      if (m.error !== undefined) w.reject(new Error(m.error));
      else w.resolve(m.value);
    });
  }
  const id = nextId++;
  const key = `${replied(channel)} ${id}`;
  return new Promise<A>((resolve, reject) => {
    const timer = setTimeout(() => {
      waiting.delete(key);
      reject(
        new Error(`the supervising process did not answer on ${channel} within ${timeoutMs} ms`),
      );
    }, timeoutMs);
    waiting.set(key, { resolve: resolve as (v: unknown) => void, reject, timer });
    process.send!({ type: asked(channel), id, payload } satisfies Question);
  });
}

/** In the supervisor: answers every child's questions on `channel` with what `answer` resolves. */
export function answerChildren<Q, A>(channel: string, answer: (q: Q) => Promise<A>): void {
  cluster.on('message', (worker, m: Question) => {
    if (m?.type !== asked(channel) || typeof m.id !== 'number') return;
    const id = m.id;
    answer(m.payload as Q).then(
      (value) =>
        worker.isConnected() && worker.send({ type: replied(channel), id, value } satisfies Reply),
      (e: Error) =>
        worker.isConnected() &&
        worker.send({ type: replied(channel), id, error: e.message } satisfies Reply),
    );
  });
}

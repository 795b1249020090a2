import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  endAcceptSpan,
  noteAccepted,
  noteHandoff,
  startAcceptSpan,
  traceparentOf,
  tracingOn,
  validTraceparent,
} from '@ens/core/internal';

/*
 * The span of `POST /v2/messages`, opened when the request arrives and ended when its answer has
 * gone (or the caller gave up), so every refusal, from the schema's to the quota's, is in it. Held
 * per request here rather than on the request object, whose type Fastify owns.
 */
type AcceptSpan = NonNullable<ReturnType<typeof startAcceptSpan>>;
const spans = new WeakMap<FastifyRequest, AcceptSpan>();

const header = (v: string | string[] | undefined) => (typeof v === 'string' ? v : undefined);

function finish(req: FastifyRequest, statusCode: number | null): void {
  const span = spans.get(req);
  if (!span) return;
  spans.delete(req);
  endAcceptSpan(span, statusCode);
}

const hooks = {
  onRequest(req: FastifyRequest, _reply: FastifyReply, done: () => void): void {
    const span = startAcceptSpan(header(req.headers.traceparent), header(req.headers.tracestate));
    if (span) spans.set(req, span);
    done();
  },
  onSend(
    req: FastifyRequest,
    reply: FastifyReply,
    payload: unknown,
    done: (err: null, payload: unknown) => void,
  ): void {
    const span = spans.get(req);
    // The handoff the 202 names: the new one, or on a replay the one first accepted with the key.
    if (span && reply.statusCode === 202 && typeof payload === 'string') {
      try {
        const handoffId = (JSON.parse(payload) as { handoff_id?: unknown }).handoff_id;
        if (typeof handoffId === 'string')
          noteHandoff(span, handoffId, reply.getHeader('idempotent-replayed') === 'true');
      } catch {
        // Not the 202 body; the span goes without the id.
      }
    }
    done(null, payload);
  },
  onResponse(req: FastifyRequest, reply: FastifyReply, done: () => void): void {
    finish(req, reply.statusCode);
    done();
  },
  onRequestAbort(req: FastifyRequest, done: () => void): void {
    finish(req, null);
    done();
  },
};

/**
 * Route hooks for the accept route: start the span (a child of the caller's `traceparent`) and end
 * it with the status. None when this process records no spans (tracing starts before the routes
 * are registered), so an untraced API pays no hook per request.
 */
export function acceptSpanHooks(): Partial<typeof hooks> {
  return tracingOn() ? hooks : {};
}

/**
 * The traceparent to store with the handoff, so the worker's and callbacks' spans join the trace:
 * the accept span's, noting on it what is being stored; untraced, the caller's own traceparent when
 * it sent a valid one (handed on to its callback), else null.
 */
export function acceptTraceparent(
  req: FastifyRequest,
  a: { clientId: string; tenant: string; deliveries: number },
): string | null {
  const span = spans.get(req);
  if (!span) return validTraceparent(header(req.headers.traceparent));
  noteAccepted(span, a);
  return traceparentOf(span);
}

/**
 * The HTTP side every peer shares: a Fastify server (the version ENS uses) with one route,
 * POST /messages, that validates the same JSON body ENS's POST /v2/messages takes (the bench posts
 * identical bodies to both) with Fastify's own JSON-schema validation, hands the recipients to the
 * peer's `accept`, and answers 202. Runs inside a peer child; tells the parent its port over IPC.
 */
import Fastify from 'fastify';

/**
 * What the bench's handoffBody() produces: tenant, event_type, one or more messages of recipients.
 */
export interface MessagesBody {
  tenant: string;
  event_type: string;
  reference?: string;
  messages: {
    channel: 'sms' | 'email' | 'push' | 'whatsapp';
    recipients: string[];
    content: { kind: 'rendered'; body: string };
  }[];
}

const bodySchema = {
  type: 'object',
  required: ['tenant', 'event_type', 'messages'],
  additionalProperties: false,
  properties: {
    tenant: { type: 'string', minLength: 1, maxLength: 64 },
    event_type: { type: 'string', minLength: 1, maxLength: 128 },
    reference: { type: 'string', maxLength: 256 },
    callback_url: { type: 'string', maxLength: 2048 },
    messages: {
      type: 'array',
      minItems: 1,
      maxItems: 4,
      items: {
        type: 'object',
        required: ['channel', 'recipients', 'content'],
        additionalProperties: false,
        properties: {
          channel: { enum: ['sms', 'email', 'push', 'whatsapp'] },
          recipients: {
            type: 'array',
            minItems: 1,
            maxItems: 10_000,
            items: { type: 'string', minLength: 3, maxLength: 320 },
          },
          content: {
            type: 'object',
            required: ['kind', 'body'],
            additionalProperties: false,
            properties: {
              kind: { const: 'rendered' },
              body: { type: 'string', minLength: 1, maxLength: 4096 },
            },
          },
        },
      },
    },
  },
} as const;

/** Starts the server on an ephemeral port; `accept` does the peer's durable part before the 202. */
export async function startIntake(
  accept: (body: MessagesBody) => Promise<number>,
): Promise<{ port: number; close(): Promise<void> }> {
  // No request logging: ENS runs at ENS_LOG_LEVEL=warn in the bench, which logs no request either.
  const app = Fastify({ logger: false, bodyLimit: 4 * 1024 * 1024 });
  app.post<{ Body: MessagesBody }>(
    '/messages',
    {
      schema: {
        body: bodySchema,
        response: { 202: { type: 'object', properties: { accepted: { type: 'integer' } } } },
      },
    },
    async (req, reply) => {
      const accepted = await accept(req.body);
      return reply.code(202).send({ accepted });
    },
  );
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  return { port: Number(new URL(address).port), close: () => app.close() };
}

/** The recipients of a body, one job each, with what a sender needs. */
export function jobsOf(
  body: MessagesBody,
): { run: string; channel: string; recipient: string; text: string }[] {
  return body.messages.flatMap((m) =>
    m.recipients.map((recipient) => ({
      run: body.event_type,
      channel: m.channel,
      recipient,
      text: m.content.body,
    })),
  );
}

/**
 * The child's life cycle: announce the port to the parent once ready, and on SIGTERM (or the parent
 * going away) stop cleanly with `stop` so in-flight jobs finish and pools close.
 */
export function serveUntilTold(port: number, stop: () => Promise<void>): void {
  let stopping = false;
  const shutdown = () => {
    if (stopping) return;
    stopping = true;
    stop().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`peer stop failed: ${(err as Error).stack ?? String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
  process.on('disconnect', shutdown);
  process.send!({ type: 'ready', port });
}

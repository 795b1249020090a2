import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { liveUnsubscribeDelivery, type Runtime } from '@ens/core';
import { suppressionReports } from '@ens/core/internal';
import { AddressRateLimits } from '../limits/rate-limits.ts';
import { ANY_PATH_ERRORS, errorResponses } from '../openapi/responses.ts';

/*
 * One-click unsubscribe (RFC 8058), the https half of the List-Unsubscribe header that bulk emails
 * carry. Anyone holding the link may use it, without signing in: the token in the path is the
 * authority (a delivery id and an HMAC over it, see consent/delivery-token.ts).
 *
 * - POST unsubscribes at once and answers 200, as mailbox providers expect: Gmail posts
 *   `List-Unsubscribe=One-Click` form-encoded, RFC 8058 also allows multipart/form-data, and the
 *   page's own button posts the same field. The body is not evidence of anything, so it is not
 *   read (only bounded). A repeat is answered 200 again.
 * - GET shows a page with a button and never unsubscribes by itself: link scanners and mail
 *   previews follow GETs.
 * - Every link that does not work (forged, malformed, expired, its delivery removed by retention)
 *   gets one 404, byte for byte, so the answer tells nothing about why.
 */

/** A form post is a few dozen bytes; a multipart one a few hundred. */
const BODY_LIMIT = 16 * 1024;

const STYLE =
  'body{font:1rem/1.5 system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 ' +
  '1rem;color:#1a1a1a;background:#fff}button{font:inherit;padding:.6rem 1.2rem;cursor:pointer}';
const STYLE_HASH = createHash('sha256').update(STYLE).digest('base64');

/**
 * No script, no asset from anywhere, only this page's style; the form may post only to this
 * origin; nobody may frame it (clickjacking the button); the token in the URL goes in no Referer.
 */
const HEADERS = {
  'content-security-policy': `default-src 'none'; style-src 'sha256-${STYLE_HASH}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'x-robots-tag': 'noindex, nofollow',
};

const page = (title: string, body: string): string => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<title>${title}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`;

/** The form posts to the page's own URL (no action): right behind any proxy prefix. */
const CONFIRM = page(
  'Unsubscribe',
  `<h1>Unsubscribe</h1>
<p>Stop receiving this kind of email at this address?</p>
<form method="post">
<input type="hidden" name="List-Unsubscribe" value="One-Click">
<button type="submit">Unsubscribe</button>
</form>`,
);

const DONE = page(
  'You are unsubscribed',
  `<h1>You are unsubscribed</h1>
<p>You will receive no more of this kind of email at this address.</p>`,
);

const NOT_FOUND = page(
  'Link not valid',
  `<h1>This link does not work</h1>
<p>The unsubscribe link is not valid, or it has expired. To stop these emails, use the link in a recent one, or contact the sender.</p>`,
);

const HTML = { 'text/html': { schema: { type: 'string' } } };
const answer = (description: string) => ({ description, content: HTML });
const NOT_FOUND_ANSWER = answer(
  'The link does not work: forged, malformed, expired (ENS_UNSUBSCRIBE_TTL) or its email was ' +
    'removed by retention. One answer for all of them.',
);
const LIMITS = {
  429:
    'Too many requests from this address (ENS_UNSUBSCRIBE_RATE_LIMIT per minute; ' +
    'ENS_ERR_RATE_LIMITED)',
};

function send(reply: FastifyReply, status: number, html: string): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(html);
}

/** GET and POST /unsubscribe/{token}, outside /v2/ and without sign-in. */
export async function unsubscribeRoutes(app: FastifyInstance, rt: Runtime): Promise<void> {
  const limits = new AddressRateLimits(rt.config.consent.unsubscribeRateLimit, 'unsubscribe');
  const ttlMs = rt.config.consent.unsubscribeTtlMs;
  await app.register(async (u) => {
    // Whatever the type (form, multipart, none), the body is bounded and not read.
    u.removeAllContentTypeParsers();
    u.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, (_req, _body, done) =>
      done(null, undefined),
    );
    u.addHook('onRequest', async (req, reply) => {
      reply.headers(HEADERS);
      await limits.consume(req.ip);
    });

    u.get<{ Params: { token: string } }>(
      '/unsubscribe/:token',
      {
        schema: {
          operationId: 'unsubscribePage',
          summary: 'One-click unsubscribe: the page',
          description:
            'A page with a button that posts the unsubscribe. Opening it unsubscribes nobody ' +
            '(link scanners follow links).',
          tags: ['unsubscribe'],
          security: [],
          params: {
            type: 'object',
            properties: {
              token: { type: 'string', description: 'The token of the List-Unsubscribe link' },
            },
            required: ['token'],
          },
          response: {
            200: answer('The page, with its button'),
            404: NOT_FOUND_ANSWER,
            ...errorResponses([429, 503, ...ANY_PATH_ERRORS], LIMITS),
          },
        },
        validatorCompiler: () => (value) => ({ value }),
      },
      async (req, reply) => {
        const id = await liveUnsubscribeDelivery(rt.db, rt.consentKey, req.params.token, ttlMs);
        return id === null ? send(reply, 404, NOT_FOUND) : send(reply, 200, CONFIRM);
      },
    );

    u.post<{ Params: { token: string } }>(
      '/unsubscribe/:token',
      {
        bodyLimit: BODY_LIMIT,
        schema: {
          operationId: 'unsubscribe',
          summary: 'One-click unsubscribe (RFC 8058)',
          description:
            "Unsubscribes the email's recipient from its event type at once (an opt_out entry " +
            'of that scope, source `unsubscribe`) and answers 200; a repeat answers 200 again. ' +
            ('The body is what mailbox providers send (`List-Unsubscribe=One-Click`, ' +
              'form-encoded or multipart) or nothing; it is not read.'),
          tags: ['unsubscribe'],
          security: [],
          params: {
            type: 'object',
            properties: {
              token: { type: 'string', description: 'The token of the List-Unsubscribe link' },
            },
            required: ['token'],
          },
          body: {
            content: {
              'application/x-www-form-urlencoded': {
                schema: {
                  type: 'object',
                  properties: { 'List-Unsubscribe': { type: 'string', const: 'One-Click' } },
                },
              },
              'multipart/form-data': {
                schema: {
                  type: 'object',
                  properties: { 'List-Unsubscribe': { type: 'string', const: 'One-Click' } },
                },
              },
            },
          },
          response: {
            200: answer('Unsubscribed'),
            404: NOT_FOUND_ANSWER,
            ...errorResponses([413, 429, 503, ...ANY_PATH_ERRORS], {
              ...LIMITS,
              413: `The body is over ${BODY_LIMIT} bytes (ENS_ERR_PAYLOAD_TOO_LARGE)`,
            }),
          },
        },
        validatorCompiler: () => (value) => ({ value }),
      },
      async (req, reply) => {
        const id = await liveUnsubscribeDelivery(rt.db, rt.consentKey, req.params.token, ttlMs);
        if (id === null) return send(reply, 404, NOT_FOUND);
        // core's door for reports: it wakes the feed itself when the report changed the delivery.
        const r = await rt.suppressions.reportForDelivery(
          { deliveryId: id },
          {
            kind: 'opt_out',
            source: 'unsubscribe',
            scopeToEventType: true,
            detail: 'one-click unsubscribe (RFC 8058)',
            at: new Date(),
          },
        );
        // Removed by retention between the two statements: the same answer as any dead link.
        if (r === null) return send(reply, 404, NOT_FOUND);
        suppressionReports.inc({ source: 'unsubscribe', kind: 'opt_out' });
        return send(reply, 200, DONE);
      },
    );
  });
}

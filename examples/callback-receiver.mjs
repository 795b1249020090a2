#!/usr/bin/env node
// A callback receiver that does what the spec asks of one: verify the signature over the raw body
// (in constant time) and reject a missing or wrong one before parsing anything. @ens/client's
// verifyCallback checks X-ENS-Signature and the Standard Webhooks headers (with their timestamp).
//
//   node examples/callback-receiver.mjs [port] [client-file]
//   CALLBACK_SECRET=whsec_... node examples/callback-receiver.mjs [port]
// client-file is what `npx ens clients create --callback-secret` printed, saved to a file.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { CallbackVerificationError, verifyCallback } from '@ens/client';

const port = Number(process.argv[2] ?? 9000);
const clientFile = process.argv[3];
let secret = process.env.CALLBACK_SECRET;
if (clientFile) {
  try {
    secret = JSON.parse(readFileSync(clientFile, 'utf8')).callback_secret;
  } catch (e) {
    console.error(
      `${clientFile}: not the JSON that \`npx ens clients create\` prints (${e.message})`,
    );
    process.exit(2);
  }
}
if (typeof secret !== 'string' || !secret) {
  console.error(
    clientFile
      ? `${clientFile} has no callback_secret: create the client with --callback-secret`
      : 'give the client file (what `npx ens clients create --callback-secret` printed) or set ' +
          'CALLBACK_SECRET',
  );
  process.exit(2);
}

createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    let p;
    try {
      p = verifyCallback(Buffer.concat(chunks), req.headers, secret);
    } catch (e) {
      if (!(e instanceof CallbackVerificationError)) throw e;
      console.log(`rejected: ${e.message}`);
      res.writeHead(401).end();
      return;
    }
    console.log(
      `verified callback ${req.headers['webhook-id']}: ${p.channel} ${p.recipient} ${p.status} attempts=${p.attempts}${p.last_error ? ` (${p.last_error})` : ''}`,
    );
    res.writeHead(204).end();
  });
}).listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}/callbacks`));

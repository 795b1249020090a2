// The SMTP server process behind smtp-test-server.ts. Plain JavaScript so that it runs with the
// bare `node` binary whether the parent runs from source (tsx) or from the built dist/ bundle.
// It speaks real SMTP (smtp-server, the server half of nodemailer's project), checks AUTH, can
// offer STARTTLS, refuses chosen recipients, and parses every accepted message with mailparser
// before handing it to the parent over the IPC channel.
//
// Protocol references: RFC 5321 (SMTP, reply codes), RFC 3463 (enhanced status codes),
// RFC 4954 (AUTH), RFC 3207 (STARTTLS).
import { SMTPServer } from 'smtp-server';
import { simpleParser } from 'mailparser';

const options = JSON.parse(process.argv[2] ?? '{}');
const users = options.users ?? {};

/** Knobs the parent can change at run time. */
const knobs = { greeting: 'ok' };

/**
 * Replies in the words and RFC 3463 enhanced codes real relays use (Postfix mostly). The codes
 * are written here rather than left to smtp-server, whose table maps a reply code to one
 * enhanced code whatever the reason (it would say 5.2.2 "mailbox full" for too many recipients).
 */
const RCPT_TEXT = {
  450: (a) =>
    `4.2.0 <${a}>: Recipient address rejected: Greylisted, see https://postgrey.schweikert.ch/help/`,
  451: (a) => `4.3.0 <${a}>: Recipient address rejected: Temporary lookup failure`,
  452: (a) => `4.3.1 <${a}>: Recipient address rejected: Insufficient system storage`,
  550: (a) => `5.1.1 <${a}>: Recipient address rejected: User unknown in local recipient table`,
  551: (a) => `5.1.6 <${a}>: User not local; please try <forward@example.net>`,
  552: () => '5.5.3 Error: too many recipients',
  454: () => '4.7.0 Throttling failure: Maximum sending rate exceeded.',
  553: (a) => `5.1.3 <${a}>: Recipient address rejected: mailbox name not allowed`,
  554: (a) => `5.7.1 <${a}>: Relay access denied`,
};
const DATA_TEXT = {
  451: '4.3.0 Error: queue file write error',
  452: '4.3.1 Insufficient system storage',
  552: '5.3.4 Message size exceeds fixed maximum message size',
  554: '5.7.1 Message rejected: content looks like spam',
};
const fallbackText = (code) => `${String(code)[0]}.0.0 Rejected by the test server`;

/**
 * `data-554@…` is accepted at RCPT and refused after DATA; `<word>-550@…` is refused at RCPT;
 * `<word>-550-5.1.10@…` is refused at RCPT with that enhanced status code.
 */
function planFor(address) {
  const local = address.slice(0, address.lastIndexOf('@')).toLowerCase();
  const data = /^data-(\d{3})$/.exec(local);
  if (data) return { stage: 'data', code: Number(data[1]) };
  const rcpt = /-(\d{3})(?:-([245]\.\d{1,3}\.\d{1,3}))?$/.exec(local);
  if (rcpt) return { stage: 'rcpt', code: Number(rcpt[1]), enhanced: rcpt[2] };
  return null;
}

const send = (msg) => {
  if (process.connected) process.send(msg);
};

function smtpError(code, text) {
  const err = new Error(text);
  err.responseCode = code;
  return err;
}

const server = new SMTPServer({
  name: 'mx.ens-test.invalid',
  banner: 'ENS test relay',
  secure: false,
  ...(options.starttls
    ? { key: options.key, cert: options.cert }
    : { disabledCommands: ['STARTTLS'], hideSTARTTLS: true }),
  authMethods: ['PLAIN', 'LOGIN'],
  authOptional: options.authOptional === true,
  // Only without STARTTLS: real relays refuse AUTH in clear text, and so does this one when it can.
  allowInsecureAuth: !options.starttls,
  disableReverseLookup: true,
  size: options.size ?? 10 * 1024 * 1024,
  logger: false,
  onConnect(_session, callback) {
    if (knobs.greeting === 'silent') return; // never greet: the client's greeting timeout must fire
    if (knobs.greeting === '421')
      return callback(smtpError(421, '4.3.2 mx.ens-test.invalid Service currently unavailable'));
    callback();
  },
  onClose() {
    send({ type: 'closed' });
  },
  onAuth(auth, _session, callback) {
    const ok = Object.hasOwn(users, auth.username ?? '') && users[auth.username] === auth.password;
    send({ type: 'auth', method: auth.method, user: auth.username ?? null, ok });
    if (!ok)
      return callback(smtpError(535, '5.7.8 Error: authentication failed: authentication failure'));
    callback(null, { user: auth.username });
  },
  onRcptTo(address, _session, callback) {
    const plan = planFor(address.address);
    if (plan?.stage === 'rcpt') {
      send({ type: 'rejected', stage: 'rcpt', address: address.address, code: plan.code });
      const text = plan.enhanced
        ? `${plan.enhanced} <${address.address}>: Recipient address rejected`
        : (RCPT_TEXT[plan.code]?.(address.address) ?? fallbackText(plan.code));
      return callback(smtpError(plan.code, text));
    }
    callback();
  },
  onData(stream, session, callback) {
    const chunks = [];
    stream.on('data', (c) => chunks.push(c));
    stream.on('error', callback);
    stream.on('end', () => {
      void (async () => {
        const raw = Buffer.concat(chunks);
        if (stream.sizeExceeded) {
          send({
            type: 'rejected',
            stage: 'data',
            address: session.envelope.rcptTo.map((r) => r.address).join(','),
            code: 552,
          });
          return callback(smtpError(552, DATA_TEXT[552]));
        }
        const rcptTo = session.envelope.rcptTo.map((r) => r.address);
        const refused = rcptTo.map(planFor).find((p) => p?.stage === 'data');
        if (refused) {
          send({ type: 'rejected', stage: 'data', address: rcptTo.join(','), code: refused.code });
          return callback(
            smtpError(refused.code, DATA_TEXT[refused.code] ?? fallbackText(refused.code)),
          );
        }
        const parsed = await simpleParser(raw, {
          skipTextToHtml: true,
          skipTextLinks: true,
          keepCidLinks: true,
        });
        const headers = {};
        for (const h of parsed.headerLines) {
          const value = h.line
            .slice(h.line.indexOf(':') + 1)
            .replace(/\r?\n[ \t]+/g, ' ')
            .trim();
          if (!(h.key in headers)) headers[h.key] = value;
        }
        const addresses = (a) =>
          a
            ? (Array.isArray(a) ? a : [a]).flatMap((x) =>
                x.value.map((v) => ({ address: v.address ?? '', name: v.name ?? '' })),
              )
            : [];
        send({
          type: 'message',
          message: {
            envelope: {
              mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
              rcptTo,
            },
            user: session.user ?? null,
            secure: session.secure === true,
            raw: raw.toString('base64'),
            messageId: parsed.messageId ?? null,
            subject: parsed.subject ?? null,
            from: addresses(parsed.from),
            to: addresses(parsed.to),
            replyTo: addresses(parsed.replyTo),
            headers,
            text: parsed.text ?? null,
            html: typeof parsed.html === 'string' ? parsed.html : null,
            attachments: parsed.attachments.map((a) => ({
              contentType: a.contentType,
              contentId: a.contentId ?? null,
              cid: a.cid ?? null,
              filename: a.filename ?? null,
              contentDisposition: a.contentDisposition,
              related: a.related === true,
              content: a.content.toString('base64'),
            })),
          },
        });
        callback(null, `Ok: queued as ${Math.random().toString(16).slice(2, 12).toUpperCase()}`);
      })().catch(callback);
    });
  },
});

server.on('error', (err) => send({ type: 'server-error', message: err.message }));

process.on('message', (msg) => {
  if (msg.type === 'set') {
    Object.assign(knobs, msg.knobs);
    send({ type: 'ack', id: msg.id });
  } else if (msg.type === 'stop') {
    process.exit(0);
  }
});
// The parent went away (crashed test, killed runner): do not linger holding the port.
process.on('disconnect', () => process.exit(0));

server.listen(0, '127.0.0.1', () => {
  send({ type: 'listening', host: '127.0.0.1', port: server.server.address().port });
});

import type { LookupAddress } from 'node:dns';
import t from 'tap';
import {
  checkOutboundUrl,
  resolvePublicAddress,
  type LookupAll,
} from '../src/outbound/outbound-guard.ts';

const PUBLIC = [
  'https://example.com/cb',
  'http://93.184.216.34/x',
  'https://example.com:8443/cb?token=abc#frag',
  'http://[2606:4700:4700::1111]/cb',
  'https://xn--bcher-kva.example/cb',
  'http://@example.com/', // empty userinfo carries no credentials and the parser drops it
];

// Refused unless allowPrivate.
const PRIVATE = [
  'http://127.0.0.1',
  'http://127.1.2.3:9000/x',
  'http://0x7f.1/', // the URL parser canonicalises these to 127.0.0.1
  'http://2130706433/',
  'http://[::1]',
  'http://[::1]:8080/cb',
  'http://10.1.2.3',
  'http://172.16.0.1/',
  'http://172.31.255.255/',
  'http://192.168.1.1/',
  'http://169.254.169.254',
  'http://169.254.169.254/latest/meta-data/',
  'http://100.64.0.1/',
  'http://0.0.0.0/',
  'http://0.1.2.3/',
  'http://224.0.0.1/',
  'http://255.255.255.255/',
  'http://240.0.0.1/',
  'http://192.0.2.10/',
  'http://[::]/',
  'http://[fc00::1]/',
  'http://[fd12:3456::1]/',
  'http://[fe80::1]/',
  'http://[ff02::1]/',
  'http://[::ffff:127.0.0.1]',
  'http://[::ffff:10.0.0.1]/',
  'http://[::ffff:169.254.169.254]/',
  'http://[::127.0.0.1]/', // IPv4-compatible, deprecated
  'http://[64:ff9b::7f00:1]/', // NAT64 of 127.0.0.1
  'http://[2001:db8::1]/',
  'http://localhost:8080',
  'http://LOCALHOST/',
  'http://localhost./',
  'http://api.localhost/',
];

// Refused even with allowPrivate.
const ALWAYS_REFUSED: Array<[string, RegExp]> = [
  ['ftp://example.com/cb', /scheme ftp/],
  ['file:///etc/passwd', /scheme file/],
  ['javascript:alert(1)', /scheme javascript/],
  ['gopher://example.com/', /scheme gopher/],
  ['http://user:pw@example.com', /credentials/],
  ['http://user@example.com/', /credentials/],
  ['https://:secret@example.com/', /credentials/],
  ['http://user:pw@127.0.0.1/', /credentials/],
  ['not a url', /not a valid URL/],
  ['/relative/path', /not a valid URL/],
  ['', /not a valid URL/],
  ['http://', /not a valid URL/],
  ['http://example.com:0/', /port 0/],
];

t.test('public URLs are allowed', async (t) => {
  for (const url of PUBLIC) {
    for (const allowPrivate of [false, true]) {
      const res = checkOutboundUrl(url, { allowPrivate });
      t.ok(res.ok, `${url} allowPrivate=${allowPrivate}`);
      if (res.ok) t.type(res.url, URL);
    }
  }
});

t.test('private, loopback and special-purpose hosts are refused', async (t) => {
  for (const url of PRIVATE) {
    const res = checkOutboundUrl(url, { allowPrivate: false });
    t.equal(res.ok, false, url);
    if (!res.ok)
      t.match(res.detail, /not a public address|localhost name/, `${url}: ${res.detail}`);
  }
});

t.test('allowPrivate lets private hosts through', async (t) => {
  for (const url of PRIVATE) t.ok(checkOutboundUrl(url, { allowPrivate: true }).ok, url);
});

t.test(
  'bad schemes, credentials and malformed URLs are refused even with allowPrivate',
  async (t) => {
    for (const [url, detail] of ALWAYS_REFUSED) {
      for (const allowPrivate of [false, true]) {
        const res = checkOutboundUrl(url, { allowPrivate });
        t.equal(res.ok, false, `${url} allowPrivate=${allowPrivate}`);
        if (!res.ok) t.match(res.detail, detail);
        if (!res.ok) t.notMatch(res.detail, /secret|pw/, 'detail does not echo credentials');
      }
    }
  },
);

t.test('details read as a phrase after the field name', async (t) => {
  t.same(checkOutboundUrl('http://127.0.0.1/', { allowPrivate: false }), {
    ok: false,
    detail: 'host 127.0.0.1 is not a public address (loopback)',
  });
  t.same(checkOutboundUrl('http://[::ffff:127.0.0.1]/', { allowPrivate: false }), {
    ok: false,
    detail: 'host [::ffff:7f00:1] is not a public address (loopback)',
  });
  t.same(checkOutboundUrl('http://a:b@example.com/', { allowPrivate: false }), {
    ok: false,
    detail: 'must not contain credentials (user:password@)',
  });
  t.same(checkOutboundUrl('ftp://example.com/', { allowPrivate: true }), {
    ok: false,
    detail: 'scheme ftp is not allowed (use http or https)',
  });
});

t.test('the returned URL is the parsed one', async (t) => {
  const res = checkOutboundUrl('HTTPS://Example.COM:443/a/../cb?x=1', { allowPrivate: false });
  t.ok(res.ok);
  if (res.ok) t.equal(res.url.href, 'https://example.com/cb?x=1');
});

function fakeLookup(answers: Record<string, LookupAddress[] | Error>) {
  const calls: string[] = [];
  const lookup: LookupAll = async (hostname, options) => {
    calls.push(hostname);
    if (options.all !== true) throw new Error('guard must ask for all addresses');
    const answer = answers[hostname];
    if (answer === undefined)
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    if (answer instanceof Error) throw answer;
    return answer;
  };
  return { lookup, calls };
}

t.test('resolvePublicAddress', async (t) => {
  const { lookup, calls } = fakeLookup({
    'public.test': [
      { address: '93.184.216.34', family: 4 },
      { address: '2606:2800:220:1::1', family: 6 },
    ],
    'v6first.test': [
      { address: '2606:2800:220:1::1', family: 6 },
      { address: '93.184.216.34', family: 4 },
    ],
    'private.test': [{ address: '10.0.0.5', family: 4 }],
    'rebind.test': [
      { address: '93.184.216.34', family: 4 },
      { address: '127.0.0.1', family: 4 },
    ],
    'mapped.test': [{ address: '::ffff:169.254.169.254', family: 6 }],
    'empty.test': [],
    'garbage.test': [{ address: 'not-an-ip', family: 4 }],
  });

  t.same(await resolvePublicAddress('public.test', { allowPrivate: false, lookup }), {
    ok: true,
    address: '93.184.216.34',
    family: 4,
  });
  t.same(
    await resolvePublicAddress('v6first.test', { allowPrivate: false, lookup }),
    {
      ok: true,
      address: '2606:2800:220:1::1',
      family: 6,
    },
    'resolver order is kept',
  );

  const priv = await resolvePublicAddress('private.test', { allowPrivate: false, lookup });
  t.equal(priv.ok, false, 'DNS answer with a private address is refused');
  if (!priv.ok) t.match(priv.detail, /resolves to 10\.0\.0\.5.*private/);

  const rebind = await resolvePublicAddress('rebind.test', { allowPrivate: false, lookup });
  t.equal(rebind.ok, false, 'one private address among public ones is enough to refuse');
  if (!rebind.ok) t.match(rebind.detail, /127\.0\.0\.1.*loopback/);

  const mapped = await resolvePublicAddress('mapped.test', { allowPrivate: false, lookup });
  t.equal(mapped.ok, false, 'IPv4-mapped answers are judged by their IPv4 address');
  if (!mapped.ok) t.match(mapped.detail, /linkLocal/);

  t.same(
    await resolvePublicAddress('private.test', { allowPrivate: true, lookup }),
    {
      ok: true,
      address: '10.0.0.5',
      family: 4,
    },
    'allowPrivate accepts and pins private answers',
  );

  for (const host of ['empty.test', 'garbage.test', 'missing.test']) {
    const res = await resolvePublicAddress(host, { allowPrivate: true, lookup });
    t.equal(res.ok, false, host);
  }
  const missing = await resolvePublicAddress('missing.test', { allowPrivate: false, lookup });
  t.match(missing, { ok: false, detail: /ENOTFOUND/ });

  calls.length = 0;
  t.same(await resolvePublicAddress('93.184.216.34', { allowPrivate: false, lookup }), {
    ok: true,
    address: '93.184.216.34',
    family: 4,
  });
  t.same(
    await resolvePublicAddress('[2606:4700:4700::1111]', { allowPrivate: false, lookup }),
    {
      ok: true,
      address: '2606:4700:4700::1111',
      family: 6,
    },
    'bracketed IPv6 from URL.hostname',
  );
  t.match(await resolvePublicAddress('[::1]', { allowPrivate: false, lookup }), { ok: false });
  t.match(await resolvePublicAddress('127.0.0.1', { allowPrivate: false, lookup }), { ok: false });
  t.same(await resolvePublicAddress('[::1]', { allowPrivate: true, lookup }), {
    ok: true,
    address: '::1',
    family: 6,
  });
  t.match(await resolvePublicAddress('localhost', { allowPrivate: false, lookup }), {
    ok: false,
    detail: /localhost/,
  });
  t.same(calls, [], 'IP literals and refused localhost names never hit DNS');
});

t.test('resolvePublicAddress with the real resolver', async (t) => {
  // `localhost` resolves locally without network access on any sane host.
  const res = await resolvePublicAddress('localhost', { allowPrivate: true });
  t.ok(res.ok, 'dns.promises.lookup satisfies LookupAll');
  if (res.ok) t.match(res.address, /^(127\.|::1$)/);
});

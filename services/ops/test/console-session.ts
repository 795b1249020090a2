import { Signer } from '@fastify/cookie';
import type { Runtime } from '@ens/core';
import { deriveKey, resolveMasterKey } from '@ens/core/internal';
import { SessionStore } from '../src/session-store.ts';
import { StaffStore, type StaffRow } from '../src/staff/staff-store.ts';

/** A browser without a browser: a cookie jar over fetch, for the console's HTTP tests. */
export class ConsoleBrowser {
  readonly cookies = new Map<string, string>();

  constructor(readonly baseUrl: string) {}

  cookieHeader(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  async request(
    method: string,
    path: string,
    form?: Record<string, string>,
  ): Promise<{ status: number; headers: Headers; text: string }> {
    const headers: Record<string, string> = {};
    if (this.cookies.size > 0) headers.cookie = this.cookieHeader();
    let body: string | undefined;
    if (form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(form).toString();
    }
    const res = await fetch(/^https?:/.test(path) ? path : this.baseUrl + path, {
      method,
      headers,
      body,
      redirect: 'manual',
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair, ...attrs] = c.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      const expired =
        attrs.some((a) => /^\s*expires=Thu, 01 Jan 1970/i.test(a)) ||
        attrs.some((a) => /^\s*max-age=0$/i.test(a.trim())) ||
        value === '';
      if (expired) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return { status: res.status, headers: res.headers, text: await res.text() };
  }

  get(path: string) {
    return this.request('GET', path);
  }

  post(path: string, form: Record<string, string>) {
    return this.request('POST', path, form);
  }

  /** GETs a page and posts one of its forms' CSRF token with the given fields. */
  async postFrom(pagePath: string, action: string, fields: Record<string, string> = {}) {
    const page = await this.get(pagePath);
    const token = csrfOf(page.text);
    return this.post(action, { _csrf: token, ...fields });
  }
}

export function csrfOf(pageHtml: string): string {
  const m = /name="_csrf" value="([^"]+)"/.exec(pageHtml);
  if (!m) throw new Error('no _csrf field on the page');
  return m[1]!;
}

/**
 * Signs in without an identity provider: a staff record and a session made directly in the
 * database.
 */
export async function signInDirectly(
  rt: Runtime,
  browser: ConsoleBrowser,
  who: { subject: string; email: string | null; groups?: string[] },
  opts: { ttlMs?: number } = {},
): Promise<{ staff: StaffRow; token: string }> {
  const { staff } = await new StaffStore(rt.db).recordSignIn({
    issuer: rt.config.ops!.issuer,
    subject: who.subject,
    email: who.email,
    name: null,
    groups: who.groups ?? [],
  });
  const { token } = await new SessionStore(rt.db, opts.ttlMs ?? rt.config.ops!.sessionTtlMs).create(
    staff.id,
  );
  const secret = deriveKey(
    await resolveMasterKey(rt.config.masterKey, rt.config.dataDir),
    'ops-cookie',
  ).toString('base64');
  browser.cookies.set('ens_ops_session', new Signer(secret).sign(token));
  return { staff, token };
}

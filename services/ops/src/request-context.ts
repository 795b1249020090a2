import type { FastifyReply, FastifyRequest } from 'fastify';
import type { OpsConfig, Runtime } from '@ens/core';
import type { AuditLog } from './staff/audit-log.ts';
import type { StaffRow, StaffStore } from './staff/staff-store.ts';
import { staffLabel } from './staff/staff-store.ts';
import type { SessionStore } from './session-store.ts';
import type { Html } from './views/html.ts';
import type { NavKey, PageContext } from './views/layout.ts';

export interface OpsAuth {
  token: string;
  sessionId: string;
  staff: StaffRow;
  superuser: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The console session, set by the console's access hook (null on public routes). */
    opsAuth: OpsAuth | null;
  }
  interface FastifyContextConfig {
    /** A console route that needs no session (sign-in, signed-out page, assets). */
    opsPublic?: boolean;
    /** A console route any signed-in person may use, superuser or not (sign-out). */
    opsAnyStaff?: boolean;
  }
}

export const SESSION_COOKIE = 'ens_ops_session';
export const LOGIN_COOKIE = 'ens_ops_login';
export const FLASH_COOKIE = 'ens_ops_flash';
export const CSRF_COOKIE = 'ens_ops_csrf';

/** What every console route module is given. */
export interface ConsoleDeps {
  rt: Runtime;
  ops: OpsConfig;
  staff: StaffStore;
  audit: AuditLog;
  sessions: SessionStore;
  /** Cookies carry Secure (ENS_PUBLIC_URL is https). */
  secure: boolean;
}

export function cookieOptions(deps: Pick<ConsoleDeps, 'secure'>, maxAgeSeconds?: number) {
  return {
    path: '/ops',
    httpOnly: true,
    sameSite: 'lax' as const,
    secure: deps.secure,
    signed: true,
    ...(maxAgeSeconds !== undefined ? { maxAge: maxAgeSeconds } : {}),
  };
}

export function auth(req: FastifyRequest): OpsAuth {
  if (!req.opsAuth) throw new Error('console route reached without a session');
  return req.opsAuth;
}

/** The audit log's actor and staff id for the signed-in person. */
export function actorOf(req: FastifyRequest): { actor: string; staffId: string } {
  const a = auth(req);
  return { actor: staffLabel(a.staff), staffId: a.staff.id };
}

export function csrfToken(req: FastifyRequest, reply: FastifyReply): string {
  return reply.generateCsrf({ userInfo: req.opsAuth?.sessionId ?? '' });
}

/** Reads the flash message left by the previous action's redirect, and clears it. */
export function takeFlash(
  req: FastifyRequest,
  reply: FastifyReply,
  deps: Pick<ConsoleDeps, 'secure'>,
): string | null {
  const raw = req.cookies[FLASH_COOKIE];
  if (!raw) return null;
  reply.clearCookie(FLASH_COOKIE, cookieOptions(deps));
  const un = reply.unsignCookie(raw);
  if (!un.valid || un.value === null) return null;
  try {
    return Buffer.from(un.value, 'base64url').toString('utf8');
  } catch {
    return null;
  }
}

export function pageContext(
  req: FastifyRequest,
  reply: FastifyReply,
  deps: Pick<ConsoleDeps, 'secure'>,
  nav: NavKey,
  flash?: string | null,
): PageContext {
  const a = auth(req);
  return {
    who: staffLabel(a.staff),
    csrf: csrfToken(req, reply),
    flash: flash ?? takeFlash(req, reply, deps),
    nav,
  };
}

export function sendPage(reply: FastifyReply, status: number, page: Html): FastifyReply {
  return reply
    .code(status)
    .header('content-type', 'text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .send(page.value);
}

/** After an action: 303 back to a page that shows the message once. */
export function redirectWithFlash(
  reply: FastifyReply,
  deps: Pick<ConsoleDeps, 'secure'>,
  url: string,
  message: string,
): FastifyReply {
  reply.setCookie(
    FLASH_COOKIE,
    Buffer.from(message, 'utf8').toString('base64url'),
    cookieOptions(deps, 60),
  );
  return reply.redirect(url, 303);
}

/** Form bodies arrive as flat string maps; a repeated field keeps its last value. */
export function formValue(body: unknown, name: string): string {
  if (body === null || typeof body !== 'object') return '';
  const v = (body as Record<string, unknown>)[name];
  if (Array.isArray(v)) return String(v[v.length - 1] ?? '');
  return typeof v === 'string' ? v : '';
}

export function queryValue(q: unknown, name: string): string {
  return formValue(q, name).trim();
}

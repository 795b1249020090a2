import { createHash, randomBytes } from 'node:crypto';
import type { Db } from '@ens/core/internal';
import type { StaffRow } from './staff/staff-store.ts';

/** The cookie holds the token; the table holds its SHA-256, so the table alone opens no session. */
function sessionId(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

const TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** Server-side console sessions: created at sign-in, ended by sign-out or by their expiry. */
export class SessionStore {
  constructor(
    private readonly db: Db,
    private readonly ttlMs: number,
  ) {}

  /** Starts a session; returns the token for the cookie. Expired sessions are swept here. */
  async create(staffId: string): Promise<{ token: string; expiresAt: Date }> {
    const token = randomBytes(32).toString('base64url');
    const expiresAt = new Date(Date.now() + this.ttlMs);
    await this.db.query('INSERT INTO ops_sessions (id, staff_id, expires_at) VALUES ($1, $2, $3)', [
      sessionId(token),
      staffId,
      expiresAt,
    ]);
    await this.db.query('DELETE FROM ops_sessions WHERE expires_at < now()');
    return { token, expiresAt };
  }

  /** The staff member of a live session, or null (unknown, expired, malformed). */
  async lookup(token: string): Promise<{ sessionId: string; staff: StaffRow } | null> {
    if (!TOKEN.test(token)) return null;
    const id = sessionId(token);
    const { rows } = await this.db.query(
      `SELECT s.id::text, s.issuer, s.subject, s.email, s.name, s.groups, s.granted
         FROM ops_sessions o JOIN staff s ON s.id = o.staff_id
        WHERE o.id = $1 AND o.expires_at > now()`,
      [id],
    );
    const r = rows[0];
    if (!r) return null;
    return {
      sessionId: id,
      staff: {
        id: r.id,
        issuer: r.issuer,
        subject: r.subject,
        email: r.email ?? null,
        name: r.name ?? null,
        groups: Array.isArray(r.groups) ? r.groups : [],
        granted: r.granted,
        firstSeen: '',
        lastSeen: '',
      },
    };
  }

  async end(token: string): Promise<void> {
    if (!TOKEN.test(token)) return;
    await this.db.query('DELETE FROM ops_sessions WHERE id = $1', [sessionId(token)]);
  }
}

export { sessionId };

import type { OpsConfig } from '@ens/core';
import { inTransaction, isoSql, type Db } from '@ens/core/internal';
import { superuserSources, type SuperuserSource } from './superuser.ts';

export interface StaffRow {
  id: string;
  issuer: string;
  subject: string;
  email: string | null;
  name: string | null;
  groups: string[];
  granted: boolean;
  firstSeen: string;
  lastSeen: string;
}

export interface SignIn {
  issuer: string;
  subject: string;
  email: string | null;
  name: string | null;
  groups: string[];
}

const COLUMNS = `id::text, issuer, subject, email, name, groups, granted, ${isoSql('first_seen')} AS first_seen, ${isoSql('last_seen')} AS last_seen`;

function toRow(r: Record<string, unknown>): StaffRow {
  return {
    id: r.id as string,
    issuer: r.issuer as string,
    subject: r.subject as string,
    email: (r.email as string | null) ?? null,
    name: (r.name as string | null) ?? null,
    groups: Array.isArray(r.groups) ? (r.groups as string[]) : [],
    granted: r.granted as boolean,
    firstSeen: r.first_seen as string,
    lastSeen: r.last_seen as string,
  };
}

/** How a staff member is named in the console and the audit log. */
export function staffLabel(s: Pick<StaffRow, 'email' | 'subject'>): string {
  return s.email ?? s.subject;
}

/**
 * Staff records (created at first sign-in) and the superuser grants of `ens staff grant|revoke`.
 * A grant for an email nobody has signed in with yet waits in staff_grants until they do.
 */
export class StaffStore {
  constructor(private readonly db: Db) {}

  /** Creates or refreshes the record at sign-in, and applies a waiting grant for the email. */
  async recordSignIn(s: SignIn): Promise<{ staff: StaffRow; grantApplied: boolean }> {
    return inTransaction(this.db, async (c) => {
      const { rows } = await c.query(
        `INSERT INTO staff (issuer, subject, email, name, groups) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (issuer, subject) DO UPDATE SET email = EXCLUDED.email, name = EXCLUDED.name, groups = EXCLUDED.groups, last_seen = now()
         RETURNING ${COLUMNS}`,
        [s.issuer, s.subject, s.email, s.name, JSON.stringify(s.groups)],
      );
      let staff = toRow(rows[0]!);
      let grantApplied = false;
      if (s.email) {
        const g = await c.query(
          'DELETE FROM staff_grants WHERE email = lower($1) RETURNING email',
          [s.email],
        );
        if (g.rowCount) {
          const u = await c.query(
            `UPDATE staff SET granted = true WHERE id = $1 RETURNING ${COLUMNS}`,
            [staff.id],
          );
          staff = toRow(u.rows[0]!);
          grantApplied = true;
        }
      }
      return { staff, grantApplied };
    });
  }

  async get(id: string): Promise<StaffRow | null> {
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM staff WHERE id = $1`, [id]);
    return rows[0] ? toRow(rows[0]) : null;
  }

  /**
   * Grants superuser rights to everyone signed in with this email, or, when nobody has yet,
   * records the grant for their first sign-in.
   */
  async grant(
    email: string,
    by: string,
  ): Promise<{ email: string; staff_updated: number; pending: boolean }> {
    const e = email.toLowerCase();
    return inTransaction(this.db, async (c) => {
      const u = await c.query('UPDATE staff SET granted = true WHERE lower(email) = $1', [e]);
      if (u.rowCount) return { email: e, staff_updated: u.rowCount, pending: false };
      await c.query(
        'INSERT INTO staff_grants (email, "by") VALUES ($1, $2) ON CONFLICT (email) DO UPDATE ' +
          'SET granted_at = now(), "by" = EXCLUDED."by"',
        [e, by],
      );
      return { email: e, staff_updated: 0, pending: true };
    });
  }

  /**
   * Clears grants for the email (on staff records and waiting ones); configuration-based rights are
   * not touched.
   */
  async revoke(email: string): Promise<{
    email: string;
    staff_updated: number;
    pending_removed: boolean;
    staff: StaffRow[];
  }> {
    const e = email.toLowerCase();
    return inTransaction(this.db, async (c) => {
      const was = await c.query<{ id: string; granted: boolean }>(
        'SELECT id::text, granted FROM staff WHERE lower(email) = $1 FOR UPDATE',
        [e],
      );
      const u = await c.query(
        `UPDATE staff SET granted = false WHERE lower(email) = $1 RETURNING ${COLUMNS}`,
        [e],
      );
      const p = await c.query('DELETE FROM staff_grants WHERE email = $1', [e]);
      return {
        email: e,
        staff_updated: was.rows.filter((r) => r.granted).length,
        pending_removed: (p.rowCount ?? 0) > 0,
        staff: u.rows.map(toRow),
      };
    });
  }

  /**
   * Everyone who signed in (most recent first), and the grants still waiting for a first sign-in.
   */
  async list(): Promise<{
    staff: StaffRow[];
    pending: { email: string; granted_at: string; by: string }[];
  }> {
    const [s, p] = await Promise.all([
      this.db.query(`SELECT ${COLUMNS} FROM staff ORDER BY staff.last_seen DESC, staff.id DESC`),
      this.db.query<{ email: string; granted_at: string; by: string }>(
        `SELECT email, ${isoSql('granted_at')} AS granted_at, "by" FROM staff_grants ORDER BY staff_grants.email`,
      ),
    ]);
    return { staff: s.rows.map(toRow), pending: p.rows };
  }
}

/** A staff row as `ens staff list` prints it, with where the rights come from. */
export function describeStaff(
  s: StaffRow,
  ops: Pick<OpsConfig, 'superuserGroup' | 'superusers'> | null,
): Record<string, unknown> {
  const sources: SuperuserSource[] = ops ? superuserSources(s, ops) : s.granted ? ['grant'] : [];
  return {
    email: s.email,
    subject: s.subject,
    issuer: s.issuer,
    name: s.name,
    superuser: sources.length > 0,
    rights_from: sources,
    granted: s.granted,
    groups: s.groups,
    first_seen: s.firstSeen,
    last_seen: s.lastSeen,
  };
}

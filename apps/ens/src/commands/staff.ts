import type { Config } from '@ens/core';
import { AuditLog, describeStaff, StaffStore, superuserSources } from '@ens/service-ops/staff';
import { withAdminSession } from './admin-session.ts';
import { UsageError, print } from '../output.ts';

const EMAIL = /^[^\s@]+@[^\s@]+$/;

/**
 * `ens staff grant EMAIL` makes someone a console superuser (now, or at their first sign-in);
 * `ens staff revoke EMAIL` takes back that grant; `ens staff list` shows everyone who signed in
 * and where their rights come from. Grants and revokes are written to the console's audit log
 * with actor "cli".
 */
export async function staffCommand(
  config: Config,
  a: { sub: string | undefined; email: string | undefined },
): Promise<void> {
  const usage = 'usage: ens staff grant EMAIL | ens staff revoke EMAIL | ens staff list';
  if (a.sub === 'list') {
    return withAdminSession(config, async (s) => {
      const { staff, pending } = await new StaffStore(s.db).list();
      print({ staff: staff.map((r) => describeStaff(r, config.ops)), pending_grants: pending });
    });
  }
  if (a.sub !== 'grant' && a.sub !== 'revoke') throw new UsageError(usage);
  const email = a.email?.trim();
  if (!email || !EMAIL.test(email))
    throw new UsageError(`${usage} (an email address, as the identity provider sends it)`);
  const sub = a.sub;
  return withAdminSession(config, async (s) => {
    const store = new StaffStore(s.db);
    const audit = new AuditLog(s.db);
    if (sub === 'grant') {
      const r = await store.grant(email, 'cli');
      await audit.write({
        actor: 'cli',
        action: 'staff.grant',
        target: r.email,
        detail: { staff_updated: r.staff_updated, pending: r.pending },
      });
      print({
        email: r.email,
        granted: true,
        staff_updated: r.staff_updated,
        pending: r.pending,
        note: r.pending
          ? 'Nobody has signed in with this email yet; the grant applies at their first sign-in.'
          : 'Superuser rights apply from the next page they open.',
      });
      return;
    }
    const r = await store.revoke(email);
    await audit.write({
      actor: 'cli',
      action: 'staff.revoke',
      target: r.email,
      detail: { staff_updated: r.staff_updated, pending_removed: r.pending_removed },
    });
    const remaining = config.ops
      ? r.staff
          .map((st) => ({ subject: st.subject, rights_from: superuserSources(st, config.ops!) }))
          .filter((x) => x.rights_from.length > 0)
      : [];
    const byEmailInConfig = config.ops?.superusers.includes(r.email) ?? false;
    const stillSuperuser = remaining.length > 0 || byEmailInConfig;
    print({
      email: r.email,
      revoked: r.staff_updated > 0 || r.pending_removed,
      staff_updated: r.staff_updated,
      pending_removed: r.pending_removed,
      still_superuser: stillSuperuser,
      ...(remaining.length > 0 ? { remaining_rights: remaining } : {}),
      note: stillSuperuser
        ? 'The grant is cleared, but this person is still a superuser through configuration ' +
          '(ENS_OPS_SUPERUSERS or ENS_OPS_SUPERUSER_GROUP); change that to take the rights away.'
        : 'The grant is cleared. Rights from configuration (ENS_OPS_SUPERUSERS, ' +
          'ENS_OPS_SUPERUSER_GROUP) are not changed by this command; this person has none.',
    });
  });
}

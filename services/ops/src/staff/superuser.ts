import type { OpsConfig } from '@ens/core';

/** What the decision needs to know about a staff member. */
export interface StaffIdentity {
  subject: string;
  email: string | null;
  /** The groups claim at the last sign-in. */
  groups: readonly string[];
  /** Set by `ens staff grant`. */
  granted: boolean;
}

export type SuperuserSource = 'group' | 'allow-list' | 'grant';

/**
 * Why this person is a superuser: the configured group in their groups claim at the last sign-in,
 * their email or subject in ENS_OPS_SUPERUSERS, or a grant by `ens staff grant`. Empty: they are
 * not.
 */
export function superuserSources(
  s: StaffIdentity,
  ops: Pick<OpsConfig, 'superuserGroup' | 'superusers'>,
): SuperuserSource[] {
  const out: SuperuserSource[] = [];
  if (ops.superuserGroup !== null && s.groups.includes(ops.superuserGroup)) out.push('group');
  const names = [s.subject.toLowerCase(), ...(s.email ? [s.email.toLowerCase()] : [])];
  if (names.some((n) => ops.superusers.includes(n))) out.push('allow-list');
  if (s.granted) out.push('grant');
  return out;
}

export function isSuperuser(
  s: StaffIdentity,
  ops: Pick<OpsConfig, 'superuserGroup' | 'superusers'>,
): boolean {
  return superuserSources(s, ops).length > 0;
}

/** The groups claim as a list of strings: providers send an array, a single string, or nothing. */
export function groupsFromClaim(v: unknown): string[] {
  if (typeof v === 'string') return v === '' ? [] : [v];
  if (Array.isArray(v)) return v.filter((g): g is string => typeof g === 'string');
  return [];
}

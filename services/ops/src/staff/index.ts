// What `ens staff …` needs, without the console's HTTP side (Fastify plugins, the OIDC client).
export {
  StaffStore,
  describeStaff,
  staffLabel,
  type StaffRow,
  type SignIn,
} from './staff-store.ts';
export { AuditLog, type AuditEntry, type AuditRow } from './audit-log.ts';
export {
  superuserSources,
  isSuperuser,
  groupsFromClaim,
  type StaffIdentity,
  type SuperuserSource,
} from './superuser.ts';

// Library entry for tests and embedders; the command itself is main.ts.
export { startRoles, parseRoles, ROLES, type Role, type RunningRoles } from './roles.ts';

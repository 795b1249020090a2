import {
  CHANNELS,
  parsePriorityEventTypes,
  parseSendWeight,
  SchedulingStore,
  SUPPRESSION_REASONS,
  SuppressionStore,
  type Channel,
  type ClientRow,
  type Config,
  type ConsentPolicy,
  type Parsed,
  type SuppressionReasonT,
} from '@ens/core';
import { AuditLog } from '@ens/service-ops/staff';
import { withAdminSession, type AdminSession } from './admin-session.ts';
import { UsageError, print } from '../output.ts';
import { openSecretFile, type SecretFile } from '../secret-file.ts';

function need(id: string | undefined, usage: string): string {
  if (!id) throw new UsageError(usage);
  return id;
}

function notFound(id: string): never {
  throw new UsageError(`no client with id ${id}`, 1);
}

/** Parses `sms=1000,email=default` into per-channel quotas (null = back to the default). */
function parseQuota(text: string): Partial<Record<Channel, number | null>> {
  const out: Partial<Record<Channel, number | null>> = {};
  for (const pair of text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const [ch, v] = pair.split('=');
    if (
      !ch ||
      !(CHANNELS as readonly string[]).includes(ch) ||
      v === undefined ||
      !/^(\d+|default)$/.test(v)
    ) {
      throw new UsageError(
        `--daily-quota takes channel=N or channel=default pairs, such as sms=1000,email=default; got "${pair}"`,
      );
    }
    out[ch as Channel] = v === 'default' ? null : Number(v);
  }
  return out;
}

export interface ClientsArgs {
  sub: string | undefined;
  id: string | undefined;
  name?: string;
  callbackSecret?: boolean;
  rate?: string;
  dailyQuota?: string;
  weight?: string;
  priorityEvents?: string;
  tenant?: string;
  reasons?: string;
  bulkEventTypes?: string;
  mustDeliverEventTypes?: string;
  /** Write the secrets shown once to this new file (0600) instead of stdout. */
  out?: string;
}

const CONSENT_USAGE =
  'usage: ens clients consent CLIENT_ID [--reasons REASON,…|none] [--bulk-event-types ' +
  'TYPE,…|none] [--must-deliver-event-types TYPE,…|none]';

/** A comma-separated list of an option (`none`: empty), each item checked; exit 1 for a bad one. */
function listOption(
  name: string,
  text: string | undefined,
  check: (item: string) => string | null,
): string[] | undefined {
  if (text === undefined) return undefined;
  if (text.trim() === 'none') return [];
  const items = text
    .split(',')
    .map((i) => i.trim())
    .filter(Boolean);
  if (items.length === 0) throw new UsageError(`${name} takes a comma-separated list, or none`, 1);
  for (const i of items) {
    const wrong = check(i);
    if (wrong) throw new UsageError(`${name}: ${wrong}`, 1);
  }
  return [...new Set(items)];
}

const eventType = (t: string): string | null =>
  t.length > 200 || /\s/.test(t)
    ? `"${t.slice(0, 60)}" is not an event type (no spaces, at most 200 characters)`
    : null;

const SCHEDULE_USAGE =
  'usage: ens clients schedule CLIENT_ID [--weight N|default] [--priority-events ' +
  'TYPE,TYPE…|none] [--tenant TENANT --weight N|default]';

/** A parsed option, or the usage error that names it. */
function option<T>(name: string, parsed: Parsed<T>): T {
  if (!parsed.ok) throw new UsageError(`${name}: ${parsed.message}`);
  return parsed.value;
}

/**
 * What a command changed, in the console's audit log beside the console's own actions, with actor
 * "cli" as `ens staff` writes it: an operator reading the log sees every client, however made.
 */
function audit(
  s: AdminSession,
  action: string,
  target: string,
  detail: Record<string, unknown> = {},
): Promise<void> {
  return new AuditLog(s.db).write({ actor: 'cli', action, target, detail });
}

/**
 * Secrets shown once: into the --out file, with only the client id on stdout, or on stdout.
 */
async function shown(
  issued: { client_id: string },
  out: SecretFile | undefined,
  path: string | undefined,
): Promise<void> {
  if (!out) return print(issued);
  await out.write(issued);
  print({ client_id: issued.client_id, secrets_written_to: path });
}

/**
 * `ens clients create|list|rotate-secret|issue-callback-secret|disable|enable|delete|limits|schedule|consent`. The arguments are
 * checked before the database is opened, so a mistyped command fails at once and touches nothing.
 */
export async function clientsCommand(config: Config, a: ClientsArgs): Promise<void> {
  await withAdminSession(config, plan(config, a));
}

function plan(config: Config, a: ClientsArgs): (s: AdminSession) => Promise<void> {
  const limitsOf = (row: ClientRow) => ({
    rate_limit: row.rateLimit ?? config.rateLimit,
    daily_quota: Object.fromEntries(
      CHANNELS.map((c) => [c, row.dailyQuota[c] ?? config.dailyQuota]),
    ),
  });
  switch (a.sub) {
    case 'create': {
      const name = a.name;
      if (!name)
        throw new UsageError(
          'usage: ens clients create --name NAME [--callback-secret] [--out FILE]',
        );
      return async (s) => {
        const out = a.out === undefined ? undefined : await openSecretFile(a.out);
        try {
          const issued = await s.clients.create(name, a.callbackSecret === true);
          await audit(s, 'client.create', issued.client_id, {
            name,
            callback_secret: a.callbackSecret === true,
          });
          await shown(issued, out, a.out);
        } catch (e) {
          await out?.discard();
          throw e;
        }
      };
    }
    case 'list':
      return async (s) => {
        const rows = await s.clients.list();
        print(
          rows.map((r) => ({
            client_id: r.id,
            name: r.name,
            disabled: r.disabled,
            has_callback_secret: r.callbackSecretEnc !== null,
            ...limitsOf(r),
            created_at: r.createdAt,
          })),
        );
      };
    case 'rotate-secret': {
      const id = need(a.id, 'usage: ens clients rotate-secret CLIENT_ID [--out FILE]');
      return async (s) => {
        const out = a.out === undefined ? undefined : await openSecretFile(a.out);
        try {
          const issued = (await s.clients.rotateSecret(id)) ?? notFound(id);
          await audit(s, 'client.rotate_secret', id);
          await shown(issued, out, a.out);
        } catch (e) {
          await out?.discard();
          throw e;
        }
      };
    }
    case 'issue-callback-secret': {
      const id = need(a.id, 'usage: ens clients issue-callback-secret CLIENT_ID');
      return async (s) => {
        const issued = (await s.clients.issueCallbackSecret(id)) ?? notFound(id);
        await audit(s, 'client.issue_callback_secret', id);
        print({ client_id: issued.client_id, callback_secret: issued.callback_secret });
      };
    }
    case 'disable': {
      const id = need(a.id, 'usage: ens clients disable CLIENT_ID');
      return async (s) => {
        if (!(await s.clients.disable(id))) notFound(id);
        await audit(s, 'client.disable', id);
        print({ client_id: id, disabled: true });
      };
    }
    case 'enable': {
      const id = need(a.id, 'usage: ens clients enable CLIENT_ID');
      return async (s) => {
        if (!(await s.clients.enable(id))) notFound(id);
        await audit(s, 'client.enable', id);
        print({ client_id: id, disabled: false });
      };
    }
    case 'delete': {
      const id = need(a.id, 'usage: ens clients delete CLIENT_ID (disable it first)');
      return async (s) => {
        const done = await s.clients.delete(id);
        if (done === 'unknown') notFound(id);
        // Two steps, so a mistyped id cannot erase a client in use: its traffic stops first.
        if (done === 'active')
          throw new UsageError(`client ${id} is active: ens clients disable ${id} first`, 1);
        await audit(s, 'client.delete', id);
        print({ client_id: id, deleted: true });
      };
    }
    case 'limits': {
      const id = need(
        a.id,
        'usage: ens clients limits CLIENT_ID [--rate N|default] [--daily-quota ' +
          'sms=N,email=default,…]',
      );
      if (a.rate !== undefined && !/^(\d+|default)$/.test(a.rate))
        throw new UsageError('--rate takes a number of requests per second, or default');
      const limits = {
        ...(a.rate !== undefined
          ? { rateLimit: a.rate === 'default' ? null : Number(a.rate) }
          : {}),
        ...(a.dailyQuota !== undefined ? { dailyQuota: parseQuota(a.dailyQuota) } : {}),
      };
      // Without --rate or --daily-quota the command only reads: nothing to audit as a change.
      const changes = Object.keys(limits).length > 0;
      return async (s) => {
        if (!(await s.clients.setLimits(id, limits))) notFound(id);
        if (changes)
          await audit(s, 'client.limits', id, {
            rate_limit: limits.rateLimit,
            daily_quota: limits.dailyQuota,
          });
        const row = (await s.clients.get(id))!;
        print({ client_id: id, ...limitsOf(row), usage_today: await s.clients.usageToday(id) });
      };
    }
    case 'schedule': {
      const id = need(a.id, SCHEDULE_USAGE);
      const weight =
        a.weight === undefined ? undefined : option('--weight', parseSendWeight(a.weight));
      const priorityEventTypes =
        a.priorityEvents === undefined
          ? undefined
          : option('--priority-events', parsePriorityEventTypes(a.priorityEvents));
      const tenant = a.tenant;
      if (tenant !== undefined && (weight === undefined || priorityEventTypes !== undefined)) {
        throw new UsageError(
          'with --tenant, give --weight (a tenant has a weight within its client; priority ' +
            'event types are per client)',
        );
      }
      return async (s) => {
        const store = new SchedulingStore(s.db);
        if (tenant !== undefined) {
          if (!(await store.setTenant(id, tenant, weight!)))
            throw new UsageError(`client ${id} has no tenant "${tenant}"`, 1);
        } else if (
          (weight !== undefined || priorityEventTypes !== undefined) &&
          !(await store.setClient(id, { weight, priorityEventTypes }))
        ) {
          notFound(id);
        }
        const now = (await store.get(id)) ?? notFound(id);
        if (tenant !== undefined) await audit(s, 'tenant.weight', `${id}/${tenant}`, { weight });
        else if (weight !== undefined || priorityEventTypes !== undefined)
          await audit(s, 'client.schedule', id, {
            weight: now.weight,
            priority_event_types: now.priorityEventTypes,
          });
        print({
          client_id: id,
          weight: now.weight,
          priority_event_types: now.priorityEventTypes,
          tenant_weights: now.tenantWeights,
        });
      };
    }
    case 'consent': {
      const id = need(a.id, CONSENT_USAGE);
      const change: Partial<ConsentPolicy> = {};
      const reasons = listOption('--reasons', a.reasons, (r) =>
        (SUPPRESSION_REASONS as readonly string[]).includes(r)
          ? null
          : `"${r}" is not a suppression reason; use ${SUPPRESSION_REASONS.join(', ')}`,
      );
      if (reasons) change.suppression_reasons = reasons as SuppressionReasonT[];
      const bulk = listOption('--bulk-event-types', a.bulkEventTypes, eventType);
      if (bulk) change.bulk_event_types = bulk;
      const mustDeliver = listOption(
        '--must-deliver-event-types',
        a.mustDeliverEventTypes,
        eventType,
      );
      if (mustDeliver) change.must_deliver_event_types = mustDeliver;
      return async (s) => {
        // The policy is the operator's (which reasons stop a send, which event types are bulk or
        // must be delivered): no client can change its own through the API.
        const store = new SuppressionStore(s.db, {
          softBounceHoldMs: config.consent.softBounceHoldMs,
        });
        const changed = Object.keys(change).length > 0;
        const policy =
          (changed ? await store.setPolicy(id, change) : await store.policy(id)) ?? notFound(id);
        if (changed) await audit(s, 'client.consent', id, { ...change });
        print({ client_id: id, ...policy });
      };
    }
    default:
      throw new UsageError(
        'usage: ens clients ' +
          'create|list|rotate-secret|issue-callback-secret|disable|enable|delete|limits|schedule|consent',
      );
  }
}

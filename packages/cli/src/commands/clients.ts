import { CHANNELS, type Channel, type Config } from '@ens/core';
import { withAdminSession } from './admin-session.ts';
import { UsageError, print } from '../output.ts';

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
  for (const pair of text.split(',').map((p) => p.trim()).filter(Boolean)) {
    const [ch, v] = pair.split('=');
    if (!ch || !(CHANNELS as readonly string[]).includes(ch) || v === undefined || !/^(\d+|default)$/.test(v)) {
      throw new UsageError(`--daily-quota takes channel=N or channel=default pairs, such as sms=1000,email=default; got "${pair}"`);
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
}

/** `ens clients create|list|rotate-secret|issue-callback-secret|disable|limits|usage`. */
export async function clientsCommand(config: Config, a: ClientsArgs): Promise<void> {
  await withAdminSession(config, async (s) => {
    switch (a.sub) {
      case 'create': {
        if (!a.name) throw new UsageError('usage: ens clients create --name NAME [--callback-secret]');
        print(await s.clients.create(a.name, a.callbackSecret === true));
        return;
      }
      case 'list': {
        const rows = await s.clients.list();
        print(rows.map((r) => ({
          client_id: r.id,
          name: r.name,
          disabled: r.disabled,
          has_callback_secret: r.callbackSecretEnc !== null,
          rate_limit: r.rateLimit ?? config.rateLimit,
          daily_quota: Object.fromEntries(CHANNELS.map((c) => [c, r.dailyQuota[c] ?? config.dailyQuota])),
          created_at: r.createdAt,
        })));
        return;
      }
      case 'rotate-secret': {
        const id = need(a.id, 'usage: ens clients rotate-secret CLIENT_ID');
        print((await s.clients.rotateSecret(id)) ?? notFound(id));
        return;
      }
      case 'issue-callback-secret': {
        const id = need(a.id, 'usage: ens clients issue-callback-secret CLIENT_ID');
        const issued = (await s.clients.issueCallbackSecret(id)) ?? notFound(id);
        print({ client_id: issued.client_id, callback_secret: issued.callback_secret });
        return;
      }
      case 'disable': {
        const id = need(a.id, 'usage: ens clients disable CLIENT_ID');
        if (!(await s.clients.disable(id))) notFound(id);
        print({ client_id: id, disabled: true });
        return;
      }
      case 'limits': {
        const id = need(a.id, 'usage: ens clients limits CLIENT_ID [--rate N|default] [--daily-quota sms=N,email=default,…]');
        if (a.rate !== undefined && !/^(\d+|default)$/.test(a.rate)) throw new UsageError('--rate takes a number of requests per second, or default');
        const ok = await s.clients.setLimits(id, {
          ...(a.rate !== undefined ? { rateLimit: a.rate === 'default' ? null : Number(a.rate) } : {}),
          ...(a.dailyQuota !== undefined ? { dailyQuota: parseQuota(a.dailyQuota) } : {}),
        });
        if (!ok) notFound(id);
        const row = (await s.clients.get(id))!;
        print({
          client_id: id,
          rate_limit: row.rateLimit ?? config.rateLimit,
          daily_quota: Object.fromEntries(CHANNELS.map((c) => [c, row.dailyQuota[c] ?? config.dailyQuota])),
          usage_today: await s.clients.usageToday(id),
        });
        return;
      }
      default:
        throw new UsageError('usage: ens clients create|list|rotate-secret|issue-callback-secret|disable|limits');
    }
  });
}

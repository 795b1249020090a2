import semver from 'semver';
import type {
  OutboundMessage,
  Provider,
  ProviderPlugin,
  RecipientReport,
  WebhookRoute,
} from '../contract.ts';
import { classifyError, type ProviderErrorKind } from '../errors.ts';
import { checkConfig, checkPlugin } from '../plugin-shape.ts';
import type {
  ConformanceFixture,
  ConformanceTarget,
  RecipientEventCase,
  RecipientReportExpectation,
  WebhookCase,
} from './fixture.ts';
import { recordingContext, type RecordingContext } from './recording-context.ts';
import { EnsError } from '../ens-error.ts';

export interface CheckResult {
  name: string;
  ok: boolean;
  /** Why it failed, in words an author can act on. */
  detail?: string;
  /** A check the fixture gave nothing to run with. */
  skipped?: boolean;
}

type Check = (name: string, fn: () => Promise<void> | void) => Promise<boolean>;

/** A conformance check that did not hold; its detail is the reason the kit prints. */
class Fail extends EnsError {
  static override readonly code: string = 'ENS_ERR_CONFORMANCE';
}
const must = (cond: unknown, detail: string): void => {
  if (!cond) throw new Fail(detail);
};

async function settle<T>(
  p: Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await p };
  } catch (error) {
    return { ok: false, error };
  }
}

const ROUTE_PATH = /^\/[A-Za-z0-9._~\-/]*$/;

/** The first contract version with recipient refusals and reports. */
const RECIPIENT_SDK = '1.3.0';

/**
 * Checks a recipient report against what the fixture expects: the kind and every field given, a
 * valid date, the provider's words as evidence, and a message or an address with its channel to
 * apply it to.
 */
function mustMatchReport(
  got: RecipientReport | undefined,
  want: RecipientReportExpectation,
  seen: readonly RecipientReport[],
): void {
  must(
    got,
    `no ${want.kind} report about a recipient (recipient reports: ${JSON.stringify(seen)})`,
  );
  const r = got!;
  must(
    r.at instanceof Date && !Number.isNaN(r.at.getTime()),
    'the recipient report has no valid `at` date',
  );
  must(
    typeof r.detail === 'string' && r.detail.trim().length > 0,
    "the recipient report has no detail; give the provider's words (the keyword, the error " +
      'code), kept as evidence',
  );
  must(
    r.providerMessageId !== undefined || (r.address !== undefined && r.channel !== undefined),
    'the recipient report names neither a providerMessageId nor an address with its channel',
  );
  for (const key of ['providerMessageId', 'address', 'channel', 'detail'] as const) {
    if (want[key] !== undefined)
      must(
        r[key] === want[key],
        `${key} ${JSON.stringify(r[key])}, expected ${JSON.stringify(want[key])}`,
      );
  }
  if (want.sender !== undefined) {
    must(
      r.sender?.id === want.sender.id && r.sender?.isDefault === want.sender.isDefault,
      `sender ${JSON.stringify(r.sender)}, expected ${JSON.stringify(want.sender)}`,
    );
  }
}

const describeRecipientReport = (want: RecipientReportExpectation | null | undefined): string =>
  want === undefined
    ? ''
    : want === null
      ? ' and reports nothing about the recipient'
      : ` and reports the recipient ${want.kind}`;

/**
 * Runs the conformance checks over a plugin module: the shape ENS's loader requires always, and,
 * with a fixture, the behaviour (a send is accepted, each failure is classified, webhooks refuse
 * forgeries and report genuine updates, close is clean). Never throws: every problem is a result.
 */
export async function runConformance(
  pkg: string,
  mod: unknown,
  fixture?: ConformanceFixture,
): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  const check: Check = async (name, fn) => {
    try {
      await fn();
      results.push({ name, ok: true });
      return true;
    } catch (e) {
      results.push({
        name,
        ok: false,
        detail: e instanceof Fail ? e.message : `threw: ${(e as Error)?.stack ?? String(e)}`,
      });
      return false;
    }
  };
  const skip = (name: string, why: string) =>
    results.push({ name, ok: true, skipped: true, detail: why });

  let plugin: ProviderPlugin | undefined;
  await check(
    'default export is a plugin ENS can load (name, channels, sdk range, configSchema, create)',
    () => {
      plugin = checkPlugin(pkg, mod);
    },
  );
  if (!plugin) return results;
  const p = plugin;

  await check(
    'configSchema is a closed object (additionalProperties: false), so typos stop the start',
    () => {
      const schema = p.configSchema as { type?: unknown; additionalProperties?: unknown };
      must(
        schema.type === 'object' && schema.additionalProperties === false,
        'declare the schema as Type.Object({...}, { additionalProperties: false })',
      );
    },
  );

  if (!fixture) {
    skip('behaviour checks', 'the package has no ./conformance export with a fixture');
    return results;
  }

  let target: ConformanceTarget | undefined;
  if (
    !(await check('fixture starts', async () => {
      target = await fixture.start();
    }))
  )
    return results;
  const tg = target!;
  try {
    await behaviour(pkg, p, tg, check, skip);
  } finally {
    await check('fixture stops', () => tg.stop());
  }
  return results;
}

async function behaviour(
  pkg: string,
  plugin: ProviderPlugin,
  tg: ConformanceTarget,
  check: Check,
  skip: (n: string, why: string) => void,
): Promise<void> {
  let config: unknown;
  await check("configSchema accepts the fixture's configuration", () => {
    config = checkConfig(pkg, plugin, tg.config);
  });
  if (config === undefined) return;
  await check('configSchema refuses a setting it does not know (typos must stop the start)', () => {
    let msg = '';
    try {
      checkConfig(pkg, plugin, { ...(tg.config as object), ensConformanceUnknownSetting: true });
    } catch (e) {
      msg = (e as Error).message;
    }
    must(
      msg !== '',
      'the fixture configuration plus an unknown key passed the schema; declare it with ' +
        'additionalProperties: false',
    );
    must(
      msg.includes('ensConformanceUnknownSetting'),
      `the refusal does not name the unknown key: ${msg}`,
    );
  });
  if (tg.invalidConfig !== undefined) {
    await check(
      'configSchema refuses the invalid configuration with a message naming the field',
      () => {
        let msg = '';
        try {
          checkConfig(pkg, plugin, tg.invalidConfig);
        } catch (e) {
          msg = (e as Error).message;
        }
        must(msg !== '', 'the invalid configuration passed the schema');
        must(/config \//.test(msg), `the refusal does not name a field: ${msg}`);
      },
    );
  } else
    skip('configSchema refuses an invalid configuration', 'the fixture gives no invalidConfig');

  const ctx = recordingContext(tg.media);
  let provider: Provider | undefined;
  if (
    !(await check('create(config, context) gives a provider with send()', async () => {
      provider = await plugin.create(config, ctx);
      must(
        provider && typeof provider.send === 'function',
        'the created provider has no send function',
      );
    }))
  )
    return;
  const pv = provider!;

  await check('routes are well formed (GET or POST, a path from /, no duplicates)', () => {
    const seen = new Set<string>();
    for (const r of pv.routes ?? []) {
      must(
        r.method === 'GET' || r.method === 'POST',
        `route ${r.path}: method ${String(r.method)} is not GET or POST`,
      );
      must(
        typeof r.path === 'string' && ROUTE_PATH.test(r.path),
        `route path ${String(r.path)} must start with / and hold only URL path characters`,
      );
      must(typeof r.handler === 'function', `route ${r.method} ${r.path} has no handler`);
      must(!seen.has(`${r.method} ${r.path}`), `route ${r.method} ${r.path} is declared twice`);
      seen.add(`${r.method} ${r.path}`);
    }
  });

  const needsDevice = plugin.pushPlatforms !== undefined;
  const sendCheck = (m: OutboundMessage) => {
    if (needsDevice && m.channel === 'push')
      must(
        m.device,
        'the plugin declares pushPlatforms, so each push send in the fixture must carry a device',
      );
  };

  let acceptedId: string | undefined;
  await check('an accepted send resolves with the provider message id', async () => {
    sendCheck(tg.sends.accepted);
    const r = await pv.send(tg.sends.accepted);
    must(
      r && typeof r.providerMessageId === 'string' && r.providerMessageId.length > 0,
      `send resolved with ${JSON.stringify(r)}, not { providerMessageId: non-empty string }`,
    );
    must(
      r.providerMessageId.length <= 512,
      'the provider message id is longer than 512 characters',
    );
    acceptedId = r.providerMessageId;
  });

  const failures: [keyof ConformanceTarget['sends'], ProviderErrorKind, string][] = [
    ['transient', 'transient', 'a provider outage is a transient error (retried)'],
    ['permanent', 'permanent', "a refusal is a permanent error carrying the provider's reason"],
    ['rateLimited', 'rate_limited', 'a throttling answer is a rate-limited error'],
    ['deviceGone', 'permanent', 'a dead device token is a permanent error marked deviceGone'],
  ];
  for (const [key, kind, name] of failures) {
    const m = tg.sends[key];
    if (!m) {
      skip(name, `the fixture gives no ${key} send`);
      continue;
    }
    await check(name, async () => {
      sendCheck(m);
      const r = await settle(pv.send(m));
      must(!r.ok, `send resolved (${JSON.stringify(r.ok && r.value)}) where the provider refused`);
      const err = (r as { error: unknown }).error;
      must(
        err !== null && typeof err === 'object' && 'ensErrorKind' in err,
        `threw an unclassified ${(err as Error)?.name ?? typeof err}: ${String((err as Error)?.message ?? err)}; throw transientError/permanentError/rateLimitedError from @ens/plugin-sdk`,
      );
      const c = classifyError(err);
      must(c.kind === kind, `classified ${c.kind}, expected ${kind} (${c.message})`);
      must(
        c.message.trim().length > 0,
        'the error has no message; it becomes last_error, so say what the provider said',
      );
      if (key === 'deviceGone')
        must(
          c.deviceGone,
          'the error is not marked deviceGone; throw deviceGoneError so ENS unregisters the token',
        );
      if (key === 'rateLimited' && tg.rateLimitHintMs !== undefined) {
        must(
          c.retryAfterMs === tg.rateLimitHintMs,
          `retryAfterMs is ${String(c.retryAfterMs)}, the provider hinted ${tg.rateLimitHintMs}`,
        );
      }
    });
  }

  for (const [i, rc] of (tg.recipientRefusals ?? []).entries()) {
    await check(
      `a refusal about the recipient (${i + 1}: ${rc.send.recipient}) is a permanent error marked ${rc.refusal}`,
      async () => {
        sendCheck(rc.send);
        const r = await settle(pv.send(rc.send));
        must(
          !r.ok,
          `send resolved (${JSON.stringify(r.ok && r.value)}) where the provider refused the recipient`,
        );
        const c = classifyError((r as { error: unknown }).error);
        must(c.kind === 'permanent', `classified ${c.kind}, expected permanent (${c.message})`);
        must(
          c.message.trim().length > 0,
          'the error has no message; it becomes last_error and the evidence of the suppression',
        );
        must(
          c.recipientRefusal === rc.refusal,
          `recipientRefusal is ${String(c.recipientRefusal)}, expected ${rc.refusal}; throw recipientError(message, '${rc.refusal}')`,
        );
      },
    );
  }
  if ((tg.recipientRefusals ?? []).length === 0)
    skip(
      'a refusal about the recipient is marked with its RecipientRefusal (SDK 1.3)',
      'the fixture gives no recipientRefusals',
    );

  if (pv.checkCredentials) {
    await check('checkCredentials() resolves with good credentials', () => pv.checkCredentials!());
    if (tg.wrongCredentials !== undefined) {
      await check('checkCredentials() rejects wrong credentials', async () => {
        const wrong = await plugin.create(
          checkConfig(pkg, plugin, tg.wrongCredentials),
          recordingContext(),
        );
        try {
          const r = await settle(wrong.checkCredentials!());
          must(!r.ok, 'checkCredentials() resolved with wrong credentials');
        } finally {
          await wrong.close?.();
        }
      });
    } else
      skip('checkCredentials() rejects wrong credentials', 'the fixture gives no wrongCredentials');
  } else skip('checkCredentials()', 'the provider has none (optional)');

  if (tg.expectReport && acceptedId) {
    const want = tg.expectReport;
    await check(`reports ${want.status} for the accepted send by itself`, async () => {
      const u = await ctx.waitForReport(
        (x) => x.providerMessageId === acceptedId && x.status === want.status,
        want.withinMs,
      );
      must(u, `no ${want.status} report for ${acceptedId} within ${want.withinMs} ms`);
      must(
        u!.at instanceof Date && !Number.isNaN(u!.at.getTime()),
        'the report has no valid `at` date',
      );
    });
  }

  const cases = tg.webhooks && acceptedId ? tg.webhooks(acceptedId) : undefined;
  const events = tg.recipientEvents ?? [];
  const reportsRecipients =
    events.length > 0 || (cases?.genuine ?? []).some((c) => c.recipientReport !== undefined);
  if (reportsRecipients || (tg.recipientRefusals ?? []).length > 0) {
    await check(
      `sdk range starts at ${RECIPIENT_SDK} or later, as the plugin refuses or reports recipients (SDK 1.3)`,
      () => {
        const lowest = semver.minVersion(plugin.sdk);
        must(
          lowest && semver.gte(lowest, RECIPIENT_SDK),
          `sdk "${plugin.sdk}" admits an ENS whose SDK has no recipientError or reportRecipient; declare "^${RECIPIENT_SDK}"`,
        );
      },
    );
  }

  if (cases && acceptedId) await webhookChecks(plugin.name, pv, cases, ctx, acceptedId, check);
  else if ((pv.routes ?? []).length > 0)
    skip('webhooks', 'the provider has routes but the fixture gives no webhook cases');
  for (const e of events) await recipientEventCheck(e, ctx, check);
  if (!reportsRecipients)
    skip(
      'reports about recipients (SDK 1.3)',
      'the fixture gives no webhook case with a recipientReport and no recipientEvents',
    );

  await check('close() resolves, and again when called twice', async () => {
    await pv.close?.();
    await pv.close?.();
  });
}

function findRoute(routes: readonly WebhookRoute[], c: WebhookCase): WebhookRoute | undefined {
  const path = c.path.split('?')[0];
  return routes.find((r) => r.method === c.method && r.path === path);
}

async function invoke(pluginName: string, route: WebhookRoute, c: WebhookCase) {
  const q = new URLSearchParams(c.path.includes('?') ? c.path.slice(c.path.indexOf('?') + 1) : '');
  const body =
    c.body === undefined ? Buffer.alloc(0) : Buffer.isBuffer(c.body) ? c.body : Buffer.from(c.body);
  return route.handler({
    headers: Object.fromEntries(
      Object.entries(c.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]),
    ),
    query: Object.fromEntries(q),
    rawBody: body,
    url: c.url ?? `http://ens.test/webhooks/${pluginName}${c.path}`,
  });
}

async function webhookChecks(
  pluginName: string,
  pv: Provider,
  cases: { genuine: WebhookCase[]; forged: WebhookCase[] },
  ctx: RecordingContext,
  acceptedId: string,
  check: Check,
): Promise<void> {
  const routes = pv.routes ?? [];
  for (const [i, c] of cases.forged.entries()) {
    await check(
      `forged webhook ${i + 1} (${c.method} ${c.path.split('?')[0]}) is refused with 4xx and reports nothing`,
      async () => {
        const route = findRoute(routes, c);
        must(route, `no route ${c.method} ${c.path}`);
        const before = ctx.reports.length;
        const beforeRecipients = ctx.recipientReports.length;
        const res = await invoke(pluginName, route!, c);
        must(res.status >= 400 && res.status < 500, `answered ${res.status}`);
        must(ctx.reports.length === before, 'a forged request produced a status report');
        must(
          ctx.recipientReports.length === beforeRecipients,
          'a forged request produced a report about a recipient',
        );
      },
    );
  }
  for (const [i, c] of cases.genuine.entries()) {
    const name = `genuine webhook ${i + 1} (${c.method} ${c.path.split('?')[0]}) is answered 2xx${c.report ? ` and reports ${c.report.status}` : ''}${describeRecipientReport(c.recipientReport)}`;
    await check(name, async () => {
      const route = findRoute(routes, c);
      must(route, `no route ${c.method} ${c.path}`);
      const before = ctx.reports.length;
      const beforeRecipients = ctx.recipientReports.length;
      const res = await invoke(pluginName, route!, c);
      must(
        res.status >= 200 && res.status < 300,
        `answered ${res.status} ${JSON.stringify(res.body)}`,
      );
      if (c.responseBody !== undefined)
        must(
          String(res.body) === c.responseBody,
          `answered ${JSON.stringify(res.body)}, expected ${JSON.stringify(c.responseBody)}`,
        );
      if (c.report) {
        const u = ctx.reports.slice(before).find((x) => x.status === c.report!.status);
        must(
          u,
          `no ${c.report.status} report (reports: ${JSON.stringify(ctx.reports.slice(before))})`,
        );
        must(
          u!.providerMessageId === (c.report.providerMessageId ?? acceptedId),
          `reported for ${u!.providerMessageId}, expected ${c.report.providerMessageId ?? acceptedId}`,
        );
        must(
          u!.at instanceof Date && !Number.isNaN(u!.at.getTime()),
          'the report has no valid `at` date',
        );
        if (c.report.error !== undefined)
          must(
            u!.error === c.report.error,
            `error ${JSON.stringify(u!.error)}, expected ${JSON.stringify(c.report.error)}`,
          );
        if (c.report.status === 'failed')
          must(
            typeof u!.error === 'string' && u!.error.length > 0,
            'a failed report carries no error; it becomes last_error',
          );
      }
      const recipientReports = ctx.recipientReports.slice(beforeRecipients);
      if (c.recipientReport === null)
        must(
          recipientReports.length === 0,
          `reported about a recipient where nothing was to be reported: ${JSON.stringify(recipientReports)}`,
        );
      else if (c.recipientReport) {
        const want = c.recipientReport;
        mustMatchReport(
          recipientReports.find((x) => x.kind === want.kind),
          {
            ...want,
            providerMessageId:
              want.providerMessageId ?? (want.address === undefined ? acceptedId : undefined),
          },
          recipientReports,
        );
      }
    });
  }
}

async function recipientEventCheck(
  e: RecipientEventCase,
  ctx: RecordingContext,
  check: Check,
): Promise<void> {
  await check(`${e.name} is answered${describeRecipientReport(e.recipientReport)}`, async () => {
    const before = ctx.recipientReports.length;
    const triggered = await settle(e.trigger());
    must(
      triggered.ok,
      `the provider's side got no answer: ${String(((triggered as { error: unknown }).error as Error)?.message ?? '')}`,
    );
    const want = e.recipientReport;
    if (want === null) {
      await new Promise((r) => setTimeout(r, e.withinMs));
      const late = ctx.recipientReports.slice(before);
      must(
        late.length === 0,
        `reported about a recipient where nothing was to be reported: ${JSON.stringify(late)}`,
      );
      return;
    }
    const got = await ctx.waitForRecipientReport(
      (r) => ctx.recipientReports.indexOf(r) >= before && r.kind === want.kind,
      e.withinMs,
    );
    mustMatchReport(got ?? undefined, want, ctx.recipientReports.slice(before));
  });
}

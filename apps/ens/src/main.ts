import { parseArgs } from 'node:util';
import { isOperatorError } from '@ens/plugin-sdk';
import { UsageError } from './output.ts';

// Commands are imported when run: `ens --help` or a mistyped command answers at once, and the
// operator commands do not load the four roles (Fastify, the worker, …) that only `serve` needs.

const HELP = `ens — the ENS operator command

  ens serve [--roles api,worker,callbacks,feed,inbound]   run the service (all roles by default)
  ens migrate                                     apply database migrations
  ens clients create --name NAME [--callback-secret] [--out FILE]   secrets into FILE, mode 0600
  ens clients list
  ens clients rotate-secret CLIENT_ID [--out FILE]
  ens clients issue-callback-secret CLIENT_ID
  ens clients disable CLIENT_ID | enable CLIENT_ID
  ens clients delete CLIENT_ID                    a disabled client, for good (its records stay)
  ens clients limits CLIENT_ID [--rate N|default] [--daily-quota sms=N,email=default,...]
  ens clients schedule CLIENT_ID [--weight N|default] [--priority-events otp.*,...|none]
  ens clients schedule CLIENT_ID --tenant TENANT --weight N|default
  ens clients consent CLIENT_ID [--reasons hard_bounce,complaint,...|none]
                      [--bulk-event-types newsletter.weekly,...|none] [--must-deliver-event-types password.reset,...|none]
  ens suppressions list --client ID --tenant T [--channel C] [--reason R] [--address A]
  ens suppressions add|remove --client ID --tenant T --channel C --address A [--reason R] [--scope EVENT_TYPE] [--detail TEXT] [--expires-at ISO]
  ens suppressions import FILE.csv --client ID --tenant T [--channel C] [--reason R]   bad rows reported by line and skipped; exit 1 if any
  ens suppressions export --client ID --tenant T [--channel C] [--reason R] [--out FILE.csv]
  ens token [--client-file FILE] [--url URL]      print an access token (CLIENT_ID/CLIENT_SECRET without a file)
  ens url                                         print where the API answers (ENS_URL, else the running serve's)
  ens callbacks dead-letters [--client CLIENT_ID] [--limit N]
  ens callbacks replay CALLBACK_ID... | --client CLIENT_ID
  ens staff grant EMAIL | revoke EMAIL | list     console superusers (/ops/)

Without DATABASE_URL, operator commands use the engines of the ens serve running on the same
ENS_DATA_DIR, and refuse to start their own while a serve runs on another one (--own-engines
to do it anyway). Configuration comes from environment variables; see the README.`;

const COMMANDS = new Set([
  'serve',
  'migrate',
  'clients',
  'token',
  'url',
  'callbacks',
  'staff',
  'suppressions',
]);

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      roles: { type: 'string' },
      name: { type: 'string' },
      'callback-secret': { type: 'boolean' },
      rate: { type: 'string' },
      'daily-quota': { type: 'string' },
      weight: { type: 'string' },
      'priority-events': { type: 'string' },
      tenant: { type: 'string' },
      'client-file': { type: 'string' },
      url: { type: 'string' },
      'own-engines': { type: 'boolean' },
      client: { type: 'string' },
      limit: { type: 'string' },
      reasons: { type: 'string' },
      'bulk-event-types': { type: 'string' },
      'must-deliver-event-types': { type: 'string' },
      channel: { type: 'string' },
      address: { type: 'string' },
      reason: { type: 'string' },
      scope: { type: 'string' },
      detail: { type: 'string' },
      'expires-at': { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, sub, ...rest] = positionals;
  if (values.help || command === 'help') {
    process.stdout.write(`${HELP}\n`);
    return;
  }
  // No command is a usage mistake like a wrong one: the usage on stderr, exit 2, so a script that
  // lost its arguments does not carry on as if `ens` had done something.
  if (command === undefined) throw new UsageError(`no command given\n\n${HELP}`);
  if (!COMMANDS.has(command)) throw new UsageError(`unknown command "${command}"; run ens --help`);
  const { operatorOptions } = await import('./operator-options.ts');
  operatorOptions.ownEngines = values['own-engines'] === true;
  const { loadConfig } = await import('@ens/core');
  const config = loadConfig();
  switch (command) {
    case 'serve': {
      const [{ serve }, { parseRoles }] = await Promise.all([
        import('./commands/serve.ts'),
        import('./roles.ts'),
      ]);
      let roles: ReturnType<typeof parseRoles>;
      try {
        roles = parseRoles(values.roles);
      } catch (e) {
        throw new UsageError((e as Error).message);
      }
      return serve(config, roles);
    }
    case 'migrate': {
      const { migrateCommand } = await import('./commands/migrate.ts');
      return migrateCommand(config);
    }
    case 'clients': {
      const { clientsCommand } = await import('./commands/clients.ts');
      return clientsCommand(config, {
        sub,
        id: rest[0],
        name: values.name,
        callbackSecret: values['callback-secret'],
        rate: values.rate,
        dailyQuota: values['daily-quota'],
        weight: values.weight,
        priorityEvents: values['priority-events'],
        tenant: values.tenant,
        reasons: values.reasons,
        bulkEventTypes: values['bulk-event-types'],
        mustDeliverEventTypes: values['must-deliver-event-types'],
        out: values.out,
      });
    }
    case 'suppressions': {
      const { suppressionsCommand } = await import('./commands/suppressions.ts');
      return suppressionsCommand(config, {
        sub,
        file: sub === 'import' ? rest[0] : undefined,
        client: values.client,
        tenant: values.tenant,
        channel: values.channel,
        address: values.address,
        reason: values.reason,
        scope: values.scope,
        detail: values.detail,
        expiresAt: values['expires-at'],
        out: values.out,
      });
    }
    case 'token': {
      const { tokenCommand } = await import('./commands/token.ts');
      return tokenCommand(config, { clientFile: values['client-file'], url: values.url });
    }
    case 'url': {
      const { findServerUrl } = await import('./server-url.ts');
      const { url, source } = await findServerUrl(config, values.url);
      process.stderr.write(`ens: ${source}\n`);
      process.stdout.write(`${url}\n`);
      return;
    }
    case 'callbacks': {
      const { callbacksCommand } = await import('./commands/callbacks.ts');
      return callbacksCommand(config, {
        sub,
        ids: sub === 'replay' ? rest : [],
        client: values.client,
        limit: values.limit,
      });
    }
    case 'staff': {
      const { staffCommand } = await import('./commands/staff.ts');
      return staffCommand(config, { sub, email: rest[0] });
    }
  }
}

main(process.argv.slice(2)).catch(async (e: unknown) => {
  // Configuration and missing-engine errors are the newcomer's first contact: one clear line.
  if (e instanceof UsageError) {
    process.stderr.write(`ens: ${e.message}\n`);
    process.exit(e.exitCode);
  }
  const code = (e as { code?: unknown } | null)?.code;
  if (code === 'EADDRINUSE' || code === 'EACCES') {
    const { address, port } = e as { address?: string; port?: number };
    process.stderr.write(
      `ens: cannot listen on ${address ?? '?'}:${port ?? '?'} (${code}${code === 'EADDRINUSE' ? ': another process uses the port' : ''}); set PORT (or ENS_HEALTH_PORT) to a free port\n`,
    );
    process.exit(2);
  }
  // ERR_PARSE_ARGS_*: node's parseArgs refusing the command line (unknown option, missing value).
  if (isOperatorError(e) || (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_'))) {
    process.stderr.write(`ens: ${(e as Error).message}\n`);
    process.exit(2);
  }
  // A database that does not answer (refused, unknown host, shutting down) is the operator's to
  // fix, not a bug: one line, no stack trace.
  const { isDatabaseUnavailable } = await import('@ens/core/internal');
  if (isDatabaseUnavailable(e)) {
    const why = (e as Error).message || (typeof code === 'string' ? code : String(e));
    process.stderr.write(
      `ens: cannot reach the database (${why}); is PostgreSQL running, and is DATABASE_URL right?\n`,
    );
    process.exit(1);
  }
  process.stderr.write(`ens: ${(e as Error)?.stack ?? String(e)}\n`);
  process.exit(1);
});

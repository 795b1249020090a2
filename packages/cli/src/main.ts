import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '@ens/core';
import { EngineMissingError } from '@ens/local-engines';
import { callbacksCommand } from './commands/callbacks.ts';
import { clientsCommand } from './commands/clients.ts';
import { migrateCommand } from './commands/migrate.ts';
import { serve } from './commands/serve.ts';
import { parseRoles } from './roles.ts';
import { UsageError } from './output.ts';

const HELP = `ens — the ENS operator command

  ens serve [--roles api,worker,callbacks,feed]   run the service (all roles by default)
  ens migrate                                     apply database migrations
  ens clients create --name NAME [--callback-secret]
  ens clients list
  ens clients rotate-secret CLIENT_ID
  ens clients issue-callback-secret CLIENT_ID
  ens clients disable CLIENT_ID
  ens clients limits CLIENT_ID [--rate N|default] [--daily-quota sms=N,email=default,...]
  ens callbacks dead-letters [--client CLIENT_ID] [--limit N]
  ens callbacks replay CALLBACK_ID... | --client CLIENT_ID

Configuration comes from environment variables; see the README.`;

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
      client: { type: 'string' },
      limit: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, sub, ...rest] = positionals;
  if (values.help || command === undefined || command === 'help') {
    process.stdout.write(HELP + '\n');
    return;
  }
  const config = loadConfig();
  switch (command) {
    case 'serve':
      return serve(config, parseRoles(values.roles));
    case 'migrate':
      return migrateCommand(config);
    case 'clients':
      return clientsCommand(config, {
        sub,
        id: rest[0],
        name: values.name,
        callbackSecret: values['callback-secret'],
        rate: values.rate,
        dailyQuota: values['daily-quota'],
      });
    case 'callbacks':
      return callbacksCommand(config, { sub, ids: sub === 'replay' ? rest : [], client: values.client, limit: values.limit });
    default:
      throw new UsageError(`unknown command "${command}"; run ens --help`);
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  // Configuration and missing-engine errors are the newcomer's first contact: one clear line.
  if (e instanceof UsageError) {
    process.stderr.write(`ens: ${e.message}\n`);
    process.exit(e.exitCode);
  }
  if (e instanceof ConfigError || e instanceof EngineMissingError || (e instanceof TypeError && /Unknown option|Unexpected argument/.test(e.message))) {
    process.stderr.write(`ens: ${e.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`ens: ${(e as Error)?.stack ?? String(e)}\n`);
  process.exit(1);
});

import type { Config } from '@ens/core';
import { withAdminSession, type AdminSession } from './admin-session.ts';
import { UsageError, print } from '../output.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * `ens callbacks dead-letters [--client ID]` and `ens callbacks replay ID…|--client ID`. The
 * arguments are checked before the database is opened.
 */
export async function callbacksCommand(
  config: Config,
  a: { sub: string | undefined; ids: string[]; client?: string; limit?: string },
): Promise<void> {
  await withAdminSession(config, plan(a));
}

function plan(a: {
  sub: string | undefined;
  ids: string[];
  client?: string;
  limit?: string;
}): (s: AdminSession) => Promise<void> {
  switch (a.sub) {
    case 'dead-letters': {
      const limit = a.limit === undefined ? 100 : Number(a.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 10_000)
        throw new UsageError('--limit takes a number from 1 to 10000');
      return async (s) => print(await s.callbacks.listDead({ clientId: a.client, limit }));
    }
    case 'replay': {
      if (a.ids.length === 0 && !a.client)
        throw new UsageError('usage: ens callbacks replay CALLBACK_ID… | --client CLIENT_ID');
      const bad = a.ids.find((id) => !UUID.test(id));
      if (bad)
        throw new UsageError(`"${bad}" is not a callback id (see ens callbacks dead-letters)`);
      return async (s) => {
        const replayed = await s.replayCallbacks({
          ids: a.ids.length > 0 ? a.ids : undefined,
          clientId: a.client,
        });
        const ids = replayed.map((c) => c.id);
        print({ replayed: ids });
        // An id that was not replayed (unknown, or not a dead letter) is the operator's mistake to
        // hear about: the JSON says what was done, the exit code that not all of it was.
        const missed = a.ids.filter((id) => !ids.includes(id.toLowerCase()));
        if (missed.length > 0)
          throw new UsageError(
            `no dead letter with id ${missed.join(', ')} (see ens callbacks dead-letters)`,
            1,
          );
      };
    }
    default:
      throw new UsageError(
        'usage: ens callbacks dead-letters [--client ID] [--limit N] | ens callbacks replay ' +
          'ID…|--client ID',
      );
  }
}

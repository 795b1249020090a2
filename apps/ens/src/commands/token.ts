import { readFile } from 'node:fs/promises';
import type { Config } from '@ens/core';
import { UsageError } from '../output.ts';
import { findServerUrl } from '../server-url.ts';

export interface TokenArgs {
  /** The JSON that `ens clients create` printed, saved to a file. */
  clientFile?: string;
  /**
   * Where ENS answers; unset: ENS_URL, the running serve's URL, http://HOST:PORT (server-url.ts).
   */
  url?: string;
}

/** Reads client_id and client_secret from the file, or from CLIENT_ID and CLIENT_SECRET. */
async function credentials(a: TokenArgs): Promise<{ id: string; secret: string }> {
  if (a.clientFile === undefined) {
    const id = process.env.CLIENT_ID;
    const secret = process.env.CLIENT_SECRET;
    if (!id || !secret)
      throw new UsageError(
        'usage: ens token --client-file FILE (the output of ens clients create), or CLIENT_ID ' +
          'and CLIENT_SECRET in the environment',
      );
    return { id, secret };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(a.clientFile, 'utf8'));
  } catch (e) {
    throw new UsageError(
      `--client-file ${a.clientFile}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : `not the JSON that ens clients create prints (${(e as Error).message})`}`,
    );
  }
  const c = parsed as { client_id?: unknown; client_secret?: unknown };
  if (typeof c.client_id !== 'string' || typeof c.client_secret !== 'string') {
    throw new UsageError(
      `--client-file ${a.clientFile}: has no client_id and client_secret (it should hold what ens clients create printed)`,
    );
  }
  return { id: c.client_id, secret: c.client_secret };
}

/**
 * `ens token`: mints an access token at the running ENS's token endpoint and prints it alone on
 * stdout, so `TOKEN=$(npx ens token …)` either holds a token or the command said why not on stderr
 * and exited non-zero (2 for a usage mistake, 1 when ENS refused or could not be reached).
 */
export async function tokenCommand(config: Config, a: TokenArgs): Promise<void> {
  const { id, secret } = await credentials(a);
  const { url: base, source } = await findServerUrl(config, a.url);
  if (a.url === undefined) process.stderr.write(`ens: using the API at ${base} (from ${source})\n`);
  let res: Response;
  try {
    res = await fetch(`${base}/v1/oauth2/token/`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: id,
        client_secret: secret,
      }).toString(),
      signal: AbortSignal.timeout(10_000),
    });
  } catch (e) {
    throw new UsageError(
      `cannot reach ENS at ${base} (${(e as Error).cause instanceof Error ? ((e as Error).cause as Error).message : (e as Error).message}); is it running? (--url to point elsewhere)`,
      1,
    );
  }
  const body = (await res.json().catch(() => ({}))) as {
    access_token?: string;
    error?: string;
    error_description?: string;
    detail?: string;
  };
  if (res.status !== 200 || typeof body.access_token !== 'string') {
    const why = body.error_description ?? body.detail ?? body.error ?? `HTTP ${res.status}`;
    throw new UsageError(`ENS at ${base} refused the token request: ${why}`, 1);
  }
  process.stdout.write(`${body.access_token}\n`);
}

import { EnsError } from '@ens/plugin-sdk';
import { fetch as undiciFetch, type RequestInit as UndiciRequestInit } from 'undici';
import { checkOutboundUrl, resolvePublicAddress, type LookupAll } from './outbound-guard.ts';
import { pinnedDispatcher } from './pinned-dispatcher.ts';

export interface GuardOptions {
  /**
   * Skip the private/loopback address checks (ENS_ALLOW_PRIVATE_CALLBACKS: internal receivers,
   * tests).
   */
  allowPrivate: boolean;
  /** Resolver for the DNS check; defaults to `dns.promises.lookup`. For tests. */
  lookup?: LookupAll;
}

/** The guard refused the address: its `message` says why, and is safe to show the client. */
export class OutboundRefusedError extends EnsError {
  static override readonly code: string = 'ENS_ERR_OUTBOUND_REFUSED';
}

/**
 * fetch for an address a client supplied (a Web Push endpoint, an alert webhook, a plugin's
 * client-given URL): the URL is checked, its host resolved and every address checked, and the
 * connection goes to exactly the checked address (TLS still verifies the hostname). Redirects are
 * not followed: a 3xx comes back as it is, for the caller to treat as a failure, since following it
 * would reach an address nobody checked. Throws OutboundRefusedError when the guard refuses.
 */
export async function guardedFetch(
  url: string,
  init: RequestInit = {},
  opts: GuardOptions,
): Promise<Response> {
  const checked = checkOutboundUrl(url, { allowPrivate: opts.allowPrivate });
  if (!checked.ok) throw new OutboundRefusedError(`the URL ${checked.detail}`);
  const resolved = await resolvePublicAddress(checked.url.hostname, {
    allowPrivate: opts.allowPrivate,
    ...(opts.lookup ? { lookup: opts.lookup } : {}),
  });
  if (!resolved.ok) throw new OutboundRefusedError(resolved.detail);
  const res = await undiciFetch(checked.url, {
    ...(init as UndiciRequestInit),
    redirect: 'manual',
    dispatcher: pinnedDispatcher(checked.url, resolved.address, resolved.family),
  });
  return res as unknown as Response;
}

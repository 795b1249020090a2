import { deliveryOfReturnPath, deliveryOfUnsubscribeMailto } from '@ens/core';

/**
 * Which mail the inbound role takes, decided at RCPT TO from the address alone: a return path ENS
 * signed for one delivery (`b<token>@domain`, where relays send bounces and some mailbox
 * providers complaints), a one-click unsubscribe mailto (`u<token>@domain`), or the operator's
 * feedback-loop address. Every other address, a forged or altered token among them, is refused
 * there (550 5.1.1), so nothing unsigned reaches DATA. The token is an HMAC with ENS's key: the
 * check needs no database, and its answer says nothing about which deliveries exist.
 */
export type InboundRecipient =
  | { kind: 'return-path'; deliveryId: string }
  | { kind: 'unsubscribe'; deliveryId: string }
  | { kind: 'feedback' };

export interface RecipientRules {
  key: Buffer;
  /** ENS_RETURN_PATH_DOMAIN. */
  domain: string;
  /** ENS_INBOUND_FEEDBACK_ADDRESS, if any. */
  feedbackAddress?: string;
}

export function readRecipient(rules: RecipientRules, address: string): InboundRecipient | null {
  const returnPath = deliveryOfReturnPath(rules.key, rules.domain, address);
  if (returnPath) return { kind: 'return-path', deliveryId: returnPath };
  const unsubscribe = deliveryOfUnsubscribeMailto(rules.key, rules.domain, address);
  if (unsubscribe) return { kind: 'unsubscribe', deliveryId: unsubscribe };
  if (rules.feedbackAddress && sameAddress(address, rules.feedbackAddress))
    return { kind: 'feedback' };
  return null;
}

/** The delivery a quoted return path names, when ENS signed it. */
export function deliveryOfQuoted(rules: RecipientRules, address: string): string | null {
  return deliveryOfReturnPath(rules.key, rules.domain, address);
}

/**
 * Domains are case-insensitive; local parts are compared case-insensitively too, as most MTAs do.
 */
function sameAddress(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

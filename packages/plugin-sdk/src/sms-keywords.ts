/**
 * The keywords a phone user texts to a sender to stop its messages, resume them or ask for help
 * (since SDK 1.3), for SMS plugins that receive mobile-originated messages. The lists are the ones
 * US carriers require honoured and Twilio answers by default
 * (https://www.twilio.com/docs/messaging/tutorials/advanced-opt-out): one list, so every SMS
 * plugin reads a STOP the same way.
 */

/** What an inbound text means for consent, when it is only a keyword. */
export type SmsKeyword = 'opt_out' | 'opt_in' | 'help';

export const SMS_OPT_OUT_KEYWORDS = [
  'STOP',
  'STOPALL',
  'UNSUBSCRIBE',
  'CANCEL',
  'END',
  'QUIT',
  'REVOKE',
  'OPTOUT',
] as const;
export const SMS_OPT_IN_KEYWORDS = ['START', 'YES', 'UNSTOP'] as const;
export const SMS_HELP_KEYWORDS = ['HELP', 'INFO'] as const;

const MEANING = new Map<string, SmsKeyword>([
  ...SMS_OPT_OUT_KEYWORDS.map((k) => [k, 'opt_out'] as const),
  ...SMS_OPT_IN_KEYWORDS.map((k) => [k, 'opt_in'] as const),
  ...SMS_HELP_KEYWORDS.map((k) => [k, 'help'] as const),
]);

/**
 * The meaning of an inbound text that is a keyword and nothing else: any case, surrounding spaces
 * and trailing punctuation ignored, and a space or hyphen inside allowed ("Stop all", "opt-out").
 * A sentence is not a keyword ("stop texting me" → null), as carriers and Twilio read them.
 *
 * @example smsKeyword(' Stop. ') // 'opt_out'
 */
export function smsKeyword(text: string): SmsKeyword | null {
  const word = text
    .trim()
    .replace(/[.!]+$/, '')
    .toUpperCase();
  if (word.length === 0 || word.length > 20 || !/^[A-Z]+(?:[ -][A-Z]+)?$/.test(word)) return null;
  return MEANING.get(word.replace(/[ -]/, '')) ?? null;
}

import { Type } from 'typebox';

export const DEFAULT_PORT = 2775;

export const ConfigSchema = Type.Object(
  {
    host: Type.String({
      minLength: 1,
      description: 'Host name or IP address of the SMSC (the operator or aggregator gives it).',
    }),
    port: Type.Integer({
      minimum: 1,
      maximum: 65_535,
      default: DEFAULT_PORT,
      description: 'TCP port of the SMSC; 2775 is the usual SMPP port.',
    }),
    tls: Type.Boolean({
      default: false,
      description: 'Connect over TLS (the SMSC must offer SMPP over TLS on this port).',
    }),
    tlsCa: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          "With tls: PEM certificate(s) of a private CA to trust for the SMSC's certificate, " +
          'in addition to the system CAs.',
      }),
    ),
    systemId: Type.String({
      minLength: 1,
      maxLength: 64,
      description: 'The system_id of the SMPP account (SMPP 3.4 allows 15 characters).',
    }),
    password: Type.String({
      maxLength: 64,
      description: 'The password of the SMPP account (SMPP 3.4 allows 8 characters). Secret.',
    }),
    systemType: Type.String({
      maxLength: 12,
      default: '',
      description:
        'The system_type sent in the bind, when the SMSC asks for one; empty by default.',
    }),
    bindMode: Type.Union([Type.Literal('transceiver'), Type.Literal('transmitter+receiver')], {
      default: 'transceiver',
      description:
        'transceiver: one session sends and receives receipts. transmitter+receiver: two ' +
        'sessions, for SMSCs without transceiver binds.',
    }),
    sourceAddr: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 20,
        description:
          "Default sender (source_addr): digits (E.164, '+' allowed) or an alphanumeric id of " +
          'up to 11 characters. The tenant setting sender_id overrides it; without either the ' +
          "SMSC's default is used.",
      }),
    ),
    enquireLinkMs: Type.Integer({
      minimum: 50,
      maximum: 600_000,
      default: 30_000,
      description:
        'Interval between enquire_link keep-alives, in ms. A missing enquire_link_resp drops ' +
        'the connection and reconnects.',
    }),
    reconnectMinMs: Type.Integer({
      minimum: 10,
      maximum: 600_000,
      default: 1_000,
      description:
        'First reconnect delay after a lost connection or refused bind, in ms; doubles on each ' +
        'failure.',
    }),
    reconnectMaxMs: Type.Integer({
      minimum: 10,
      maximum: 3_600_000,
      default: 60_000,
      description: 'Largest reconnect delay, in ms.',
    }),
    connectTimeoutMs: Type.Integer({
      minimum: 10,
      maximum: 120_000,
      default: 10_000,
      description: 'Time limit for the TCP (and TLS) connection plus the bind response, in ms.',
    }),
    submitTimeoutMs: Type.Integer({
      minimum: 10,
      maximum: 120_000,
      default: 10_000,
      description:
        'Time limit for a submit_sm_resp (and for an enquire_link_resp, capped at ' +
        'enquireLinkMs), in ms.',
    }),
    registeredDelivery: Type.Boolean({
      default: true,
      description:
        'Ask the SMSC for delivery receipts (registered_delivery 1), reported as delivered / ' +
        'failed.',
    }),
    windowSize: Type.Integer({
      minimum: 1,
      maximum: 1_000,
      default: 10,
      description:
        'Most submit_sm in flight (sent, not yet answered) at once on the session; further ' +
        'sends wait.',
    }),
  },
  { additionalProperties: false }, // a misspelt setting must stop the start, not be ignored
);

export type BindMode = 'transceiver' | 'transmitter+receiver';

/**
 * The configuration as the schema admits it (defaults may be absent when create() is called
 * directly).
 */
export interface SmppConfigInput {
  host: string;
  port?: number;
  tls?: boolean;
  tlsCa?: string;
  systemId: string;
  password: string;
  systemType?: string;
  bindMode?: BindMode;
  sourceAddr?: string;
  enquireLinkMs?: number;
  reconnectMinMs?: number;
  reconnectMaxMs?: number;
  connectTimeoutMs?: number;
  submitTimeoutMs?: number;
  registeredDelivery?: boolean;
  windowSize?: number;
}

export type SmppConfig = Required<Omit<SmppConfigInput, 'tlsCa' | 'sourceAddr'>> &
  Pick<SmppConfigInput, 'tlsCa' | 'sourceAddr'>;

/** Fills the schema's defaults, for a caller that did not run the config through the schema. */
export function resolveConfig(c: SmppConfigInput): SmppConfig {
  const reconnectMinMs = c.reconnectMinMs ?? 1_000;
  return {
    host: c.host,
    port: c.port ?? DEFAULT_PORT,
    tls: c.tls ?? false,
    tlsCa: c.tlsCa,
    systemId: c.systemId,
    password: c.password,
    systemType: c.systemType ?? '',
    bindMode: c.bindMode ?? 'transceiver',
    sourceAddr: c.sourceAddr,
    enquireLinkMs: c.enquireLinkMs ?? 30_000,
    reconnectMinMs,
    reconnectMaxMs: Math.max(reconnectMinMs, c.reconnectMaxMs ?? 60_000),
    connectTimeoutMs: c.connectTimeoutMs ?? 10_000,
    submitTimeoutMs: c.submitTimeoutMs ?? 10_000,
    registeredDelivery: c.registeredDelivery ?? true,
    windowSize: c.windowSize ?? 10,
  };
}

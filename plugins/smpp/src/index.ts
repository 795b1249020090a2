import { randomInt } from 'node:crypto';
import type { PDU } from 'smpp';
import { definePlugin, type PluginContext, type Provider } from '@ens/plugin-sdk';
import { ESME_ROK, submitError } from './command-status.ts';
import { ConfigSchema, resolveConfig, type SmppConfig, type SmppConfigInput } from './config.ts';
import { ESM_CLASS_RECEIPT, parseReceipt, receiptUpdate } from './delivery-receipt.ts';
import { mobileOriginatedReport } from './mobile-originated.ts';
import { SmppConnection, type BindCommand } from './smpp-connection.ts';
import { submitParams } from './submit.ts';

/** How many later-segment ids are remembered to route their receipts to the message's first id. */
const SEGMENT_MEMORY = 10_000;

function createProvider(config: SmppConfig, context: PluginContext): Provider {
  const { logger } = context;
  /** message_id of segment 2..n → [first segment's id, "segment k of n"]. */
  const segmentOf = new Map<string, [string, string]>();

  async function onDeliver(pdu: PDU): Promise<number> {
    const esmClass = typeof pdu.esm_class === 'number' ? pdu.esm_class : 0;
    if ((esmClass & ESM_CLASS_RECEIPT) === 0) {
      // A mobile-originated message: a STOP or START is reported (a failed report throws, and the
      // SMSC is asked to deliver it again); anything else is acknowledged so it is not redelivered.
      const report = mobileOriginatedReport(pdu, config.sourceAddr, new Date());
      if (report) {
        await context.reportRecipient(report);
        logger.info(
          { source: pdu.source_addr, destination: pdu.destination_addr, kind: report.kind },
          'smpp: reported a mobile-originated keyword',
        );
        return ESME_ROK;
      }
      logger.info(
        { source: pdu.source_addr },
        'smpp: ignored a mobile-originated deliver_sm (ENS takes only STOP and START)',
      );
      return ESME_ROK;
    }
    const receipt = parseReceipt(pdu);
    if (!receipt) {
      logger.warn({ esmClass }, 'smpp: a delivery receipt without a message id or state; ignored');
      return ESME_ROK;
    }
    const update = receiptUpdate(receipt, new Date());
    if (!update) return ESME_ROK; // ENROUTE, ACCEPTD: not an outcome yet
    const segment = segmentOf.get(receipt.messageId);
    if (segment) {
      // The delivery follows its first segment's receipt; a later segment only matters when it
      // failed, as the text then never arrived whole.
      if (update.status !== 'failed') return ESME_ROK;
      update.providerMessageId = segment[0];
      update.error = `${update.error} on ${segment[1]}`;
    }
    await context.reportStatus(update);
    return ESME_ROK;
  }

  const common = {
    host: config.host,
    port: config.port,
    tls: config.tls,
    ...(config.tlsCa !== undefined ? { tlsCa: config.tlsCa } : {}),
    systemId: config.systemId,
    password: config.password,
    systemType: config.systemType,
    enquireLinkMs: config.enquireLinkMs,
    reconnectMinMs: config.reconnectMinMs,
    reconnectMaxMs: config.reconnectMaxMs,
    connectTimeoutMs: config.connectTimeoutMs,
    submitTimeoutMs: config.submitTimeoutMs,
    windowSize: config.windowSize,
    logger,
    onDeliver,
  };
  const binds: BindCommand[] =
    config.bindMode === 'transceiver'
      ? ['bind_transceiver']
      : ['bind_transmitter', 'bind_receiver'];
  const connections = binds.map((bind) => new SmppConnection({ ...common, bind }));
  const transmitter = connections[0]!;
  // Started here, not awaited: an SMSC that is down must not stop ENS from starting.
  for (const c of connections) c.start();

  let concatRef = randomInt(256);

  return {
    async send(m) {
      concatRef = (concatRef + 1) % 256; // a new reference per attempt: a retry's segments must not merge with the last one's
      const parts = submitParams(m, {
        defaultSender: config.sourceAddr,
        registeredDelivery: config.registeredDelivery,
        concatRef,
      });
      const ids: string[] = [];
      for (const [i, params] of parts.entries()) {
        const resp = await transmitter.request('submit_sm', params);
        if (resp.command_status !== ESME_ROK) {
          const where =
            parts.length > 1
              ? `segment ${i + 1} of ${parts.length}${i > 0 ? `, ${i} already accepted as ${ids[0]}` : ''}`
              : undefined;
          throw submitError(resp.command_status, where);
        }
        const id = typeof resp.message_id === 'string' ? resp.message_id : '';
        if (id === '')
          logger.warn(
            { deliveryId: m.deliveryId },
            'smpp: submit_sm_resp carried no message_id; receipts cannot be matched',
          );
        ids.push(id);
      }
      const first = ids[0] || `smpp-no-id:${m.deliveryId}:${m.attempt}`;
      for (const [i, id] of ids.entries()) {
        if (i === 0 || id === '') continue;
        segmentOf.set(id, [first, `segment ${i + 1} of ${ids.length}`]);
        if (segmentOf.size > SEGMENT_MEMORY) segmentOf.delete(segmentOf.keys().next().value!);
      }
      return { providerMessageId: first };
    },

    /**
     * Resolves when bound (binding now if the session is down); rejects with the bind refusal or
     * connection error.
     */
    async checkCredentials() {
      await Promise.all(connections.map((c) => c.checkBound()));
    },

    async close() {
      await Promise.all(connections.map((c) => c.close()));
    },
  };
}

export default definePlugin<SmppConfigInput>({
  name: 'smpp',
  channels: ['sms'],
  // 1.3: recipientError and context.reportRecipient.
  sdk: '^1.3.0',
  configSchema: ConfigSchema,
  create(config, context) {
    return createProvider(resolveConfig(config), context);
  },
});

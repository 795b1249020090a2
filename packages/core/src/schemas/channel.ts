import { CHANNELS } from '@ens/plugin-sdk';
import { literalUnion } from './literal-union.ts';

export { CHANNELS };
export type Channel = (typeof CHANNELS)[number];
export const Channel = literalUnion(CHANNELS, { description: 'Delivery channel' });

export const DELIVERY_STATUSES = ['pending', 'sent', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];
export const DeliveryStatus = literalUnion(DELIVERY_STATUSES);

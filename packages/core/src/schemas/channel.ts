import { Type } from 'typebox';

export const CHANNELS = ['sms', 'email', 'push', 'whatsapp'] as const;
export type Channel = (typeof CHANNELS)[number];
export const Channel = Type.Union([Type.Literal('sms'), Type.Literal('email'), Type.Literal('push'), Type.Literal('whatsapp')], {
  description: 'Delivery channel',
});

export const DELIVERY_STATUSES = ['pending', 'sent', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];
export const DeliveryStatus = Type.Union([Type.Literal('pending'), Type.Literal('sent'), Type.Literal('failed')]);

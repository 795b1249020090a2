import { Type, type Static } from 'typebox';
import { Channel, CHANNELS } from './channel.ts';

export const InlineImage = Type.Object(
  {
    cid: Type.String({ minLength: 1, maxLength: 200 }),
    media_type: Type.Optional(
      Type.String({ pattern: '^image/[A-Za-z0-9.+-]+$', default: 'image/png' }),
    ),
    data: Type.String({
      minLength: 1,
      description: 'Base64-encoded bytes. Moved to storage on receipt.',
    }),
  },
  { additionalProperties: false },
);

export const Content = Type.Object(
  {
    kind: Type.Union([Type.Literal('rendered'), Type.Literal('template')]),
    body: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 1_048_576,
        description:
          'At most 1,600 characters for sms, 1 MiB for email; push: subject, body and data at ' +
          'most 3,072 bytes together',
      }),
    ),
    subject: Type.Optional(Type.String({ maxLength: 998 })),
    html: Type.Optional(Type.String({ minLength: 1, maxLength: 1_048_576 })),
    inline_images: Type.Optional(Type.Array(InlineImage, { maxItems: 50 })),
    data: Type.Optional(
      Type.Record(Type.String({ maxLength: 256 }), Type.String({ maxLength: 3072 }), {
        maxProperties: 100,
      }),
    ),
    template_name: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
    language: Type.Optional(Type.String({ minLength: 2, maxLength: 20 })),
    body_params: Type.Optional(
      Type.Array(Type.String({ maxLength: 1024 }), {
        maxItems: 100,
        description:
          'Each: no line breaks, tabs or control characters, no run of four or more spaces, ' +
          'not empty',
      }),
    ),
    url_button_suffix: Type.Optional(Type.String({ minLength: 1, maxLength: 2000 })),
  },
  { additionalProperties: false },
);
export type Content = Static<typeof Content>;

export const MessageEntry = Type.Object(
  {
    channel: Channel,
    recipients: Type.Array(Type.String({ minLength: 1, maxLength: 320 }), { minItems: 1 }),
    content: Content,
  },
  { additionalProperties: false },
);
export type MessageEntry = Static<typeof MessageEntry>;

export const Handoff = Type.Object(
  {
    tenant: Type.String({ minLength: 1, maxLength: 200 }),
    event_type: Type.String({ minLength: 1, maxLength: 200 }),
    reference: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    callback_url: Type.Optional(Type.String({ minLength: 1, maxLength: 2000 })),
    // One entry per channel at most (planDeliveries refuses a repeated channel by name).
    messages: Type.Array(MessageEntry, { minItems: 1, maxItems: CHANNELS.length }),
  },
  { additionalProperties: false },
);
export type Handoff = Static<typeof Handoff>;

export const AcceptedDelivery = Type.Object({
  delivery_id: Type.String(),
  channel: Channel,
  recipient: Type.String(),
  status: Type.Literal('pending'),
});

export const AcceptedHandoff = Type.Object({
  handoff_id: Type.String(),
  tenant: Type.String(),
  event_type: Type.String(),
  reference: Type.Union([Type.String(), Type.Null()]),
  status: Type.Literal('pending'),
  deliveries: Type.Array(AcceptedDelivery),
});
export type AcceptedHandoff = Static<typeof AcceptedHandoff>;

export * from './ens-error.ts';
export * from './contract.ts';
export * from './errors.ts';
export * from './plugin-shape.ts';
export * from './retry-after.ts';
export * from './excerpt.ts';
export * from './sms-keywords.ts';

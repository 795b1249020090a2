export * from './contract.ts';
export * from './errors.ts';
